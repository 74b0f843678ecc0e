# A NiFi 2 Python processor with a pinned dependency: NiFi installs ProcessorDetails.dependencies
# into the processor's own environment; flowactors makes them its Ray runtime_env. The processor
# reports the version of 'inflection' it ran with in 'inflection.version'.
import inflection

from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult


class Pluralize(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Pluralizes every word of the content (with inflection 0.5.0).'
        tags = ['text', 'example']
        dependencies = ['inflection==0.5.0']

    def __init__(self, **kwargs):
        pass

    def transform(self, context, flowfile):
        words = flowfile.getContentsAsBytes().decode('utf-8').split()
        return FlowFileTransformResult(relationship='success',
                                       contents=' '.join(inflection.pluralize(w) for w in words),
                                       attributes={'inflection.version': inflection.__version__})
