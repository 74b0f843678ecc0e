# A NiFi 2 Python processor whose relationships depend on its configuration: one per route named
# in 'Routes', plus 'unmatched'. getRelationships() takes no context, so the routes are kept from
# customValidate (NiFi validates before it asks) and onScheduled.
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.properties import PropertyDescriptor, StandardValidators, ValidationResult
from nifiapi.relationship import Relationship

RESERVED = ('original', 'failure', 'unmatched')


class RouteOnField(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Routes each FlowFile to the relationship named by one of its attributes.'
        tags = ['routing', 'example']

    ATTRIBUTE = PropertyDescriptor(
        name='Attribute',
        description='The attribute whose value names the route.',
        required=True,
        validators=[StandardValidators.NON_EMPTY_VALIDATOR],
    )
    ROUTES = PropertyDescriptor(
        name='Routes',
        description='The routes, comma-separated; each becomes a relationship.',
        required=True,
        validators=[StandardValidators.NON_EMPTY_VALIDATOR],
    )
    UNMATCHED = Relationship(name='unmatched', description='FlowFiles whose attribute names no route')

    def __init__(self, **kwargs):
        self.routes = []

    def getPropertyDescriptors(self):
        return [self.ATTRIBUTE, self.ROUTES]

    def _keep_routes(self, context):
        value = context.getProperty(self.ROUTES).getValue() or ''
        self.routes = [r.strip() for r in value.split(',') if r.strip()]

    def customValidate(self, context):
        self._keep_routes(context)
        return [ValidationResult(subject='Routes', explanation=f"'{r}' is a relationship the processor has anyway",
                                 valid=False, input=r) for r in self.routes if r in RESERVED]

    def onScheduled(self, context):
        self._keep_routes(context)

    def getRelationships(self):
        return [Relationship(name=r, description=f"FlowFiles routed to '{r}'") for r in self.routes] + [self.UNMATCHED]

    def transform(self, context, flowfile):
        value = flowfile.getAttribute(context.getProperty(self.ATTRIBUTE).getValue())
        route = value if value in self.routes else 'unmatched'
        return FlowFileTransformResult(relationship=route, attributes={'route': route})
