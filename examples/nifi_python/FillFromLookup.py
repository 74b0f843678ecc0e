# A NiFi 2 Python processor that uses a controller service, as NiFi's Python API gives one:
# the property names a StringLookupService, asControllerService() returns it, coordinates are a
# java.util.HashMap made through the JVM handle, and the answer is a java.util.Optional.
import json

from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.properties import PropertyDescriptor, StandardValidators


class FillFromLookup(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = "Looks the JSON content's 'key' field up and writes the answer into its 'found' field."
        tags = ['lookup', 'json', 'example']

    LOOKUP = PropertyDescriptor(name='Lookup Service', description='Where keys are looked up', required=True,
                                controller_service_definition='StringLookupService')
    FIELD = PropertyDescriptor(name='Key Field', description='The field holding the key', required=True,
                               default_value='key', validators=[StandardValidators.NON_EMPTY_VALIDATOR])

    def __init__(self, jvm=None, **kwargs):
        self.jvm = jvm

    def getPropertyDescriptors(self):
        return [self.LOOKUP, self.FIELD]

    def transform(self, context, flowfile):
        service = context.getProperty(self.LOOKUP).asControllerService()
        record = json.loads(flowfile.getContentsAsBytes())
        coordinates = self.jvm.java.util.HashMap()
        coordinates.put('key', record[context.getProperty(self.FIELD).getValue()])
        found = service.lookup(coordinates)
        record['found'] = found.get() if found.isPresent() else None
        return FlowFileTransformResult(relationship='success', contents=json.dumps(record))
