# A NiFi 2 Python processor in a package: its dependencies come from the package's
# requirements.txt (inflection 0.5.1, while Pluralize pins 0.5.0: each runs in its own
# environment), and it imports a helper module of the package by its file name.
import inflection
import wordcase

from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult


class Titleize(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Titleizes the content (with inflection 0.5.1).'
        tags = ['text', 'example']

    def __init__(self, **kwargs):
        pass

    def transform(self, context, flowfile):
        text = flowfile.getContentsAsBytes().decode('utf-8')
        return FlowFileTransformResult(relationship='success', contents=wordcase.titled(text),
                                       attributes={'inflection.version': inflection.__version__})
