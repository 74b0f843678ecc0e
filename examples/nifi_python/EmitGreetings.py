# A NiFi 2 Python source: one FlowFile per name each time it is triggered, until every name was
# greeted; then create() returns None (after asking not to be triggered for a while).
from nifiapi.flowfilesource import FlowFileSource, FlowFileSourceResult
from nifiapi.properties import PropertyDescriptor, StandardValidators


class EmitGreetings(FlowFileSource):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileSource']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Greets each name in turn, one FlowFile a trigger.'
        tags = ['source', 'example']

    GREETING = PropertyDescriptor(name='Greeting', description='The greeting.', default_value='Hello',
                                  required=True)
    NAMES = PropertyDescriptor(name='Names', description='Who to greet, comma-separated.', required=True,
                               validators=[StandardValidators.NON_EMPTY_VALIDATOR])

    def __init__(self, **kwargs):
        self.greeted = 0

    def getPropertyDescriptors(self):
        return [self.GREETING, self.NAMES]

    def create(self, context):
        names = [n.strip() for n in context.getProperty(self.NAMES).getValue().split(',') if n.strip()]
        if self.greeted >= len(names):
            context.yield_resources()
            return None
        name = names[self.greeted]
        self.greeted += 1
        greeting = context.getProperty(self.GREETING).getValue()
        self.logger.info(f'greeting {name}')
        return FlowFileSourceResult(relationship='success', attributes={'greeting.name': name, 'filename': name},
                                    contents=f'{greeting}\n{name}\n')
