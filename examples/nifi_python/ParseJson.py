# A NiFi 2 Python processor that fails FlowFiles with attributes: content that is not JSON goes to
# 'failure' with the parser's message in 'json.error'; an empty content raises, which sends the
# FlowFile to 'failure' unchanged (the reason is logged).
import json

from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.properties import PropertyDescriptor, StandardValidators


class ParseJson(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Pretty-prints JSON content; content that is not JSON fails with the reason.'
        tags = ['json', 'example']

    INDENT = PropertyDescriptor(
        name='Indent',
        description='Spaces per indentation level.',
        required=True,
        default_value=2,
        validators=[StandardValidators.NON_NEGATIVE_INTEGER_VALIDATOR],
    )

    def __init__(self, **kwargs):
        pass

    def getPropertyDescriptors(self):
        return [self.INDENT]

    def transform(self, context, flowfile):
        text = flowfile.getContentsAsBytes()
        if not text:
            raise ValueError('the content is empty')
        try:
            document = json.loads(text)
        except ValueError as err:
            return FlowFileTransformResult(relationship='failure', attributes={'json.error': str(err)},
                                           contents='this content is ignored on failure')
        pretty = json.dumps(document, indent=context.getProperty(self.INDENT).asInteger(), sort_keys=True)
        return FlowFileTransformResult(relationship='success', contents=pretty.encode('utf-8'),
                                       attributes={'json.type': type(document).__name__, 'mime.type': 'application/json'})
