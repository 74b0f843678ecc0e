# A NiFi 2 Python processor that keeps state: each FlowFile gets the next number of a sequence
# that survives restarts (NiFi's StateManager, NiFi 2.1 and later).
from nifiapi.componentstate import Scope
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.properties import PropertyDescriptor


class StampSequence(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = "Sets 'sequence.number' to the next number of a sequence kept in the processor's state."
        tags = ['state', 'example']

    SCOPE = PropertyDescriptor(name='State Scope', description='Where the sequence is kept.', required=True,
                               default_value='LOCAL', allowable_values=['LOCAL', 'CLUSTER'])

    def __init__(self, **kwargs):
        pass

    def getPropertyDescriptors(self):
        return [self.SCOPE]

    def transform(self, context, flowfile):
        scope = Scope[context.getProperty(self.SCOPE).getValue()]
        state = context.getStateManager()
        while True:  # compare-and-set: another task, or another node in CLUSTER scope, may take one first
            stored = state.getState(scope)
            number = int(stored.get('next') or '1')
            if state.replace(stored, {'next': str(number + 1)}, scope):
                break
        return FlowFileTransformResult(relationship='success', attributes={'sequence.number': str(number)})
