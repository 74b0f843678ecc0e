# A NiFi 2 Python processor (a content transform). It imports only nifiapi, so the same file
# loads in Apache NiFi 2 and in flowactors (docs/nifi-python-processors.md).
from nifiapi.documentation import use_case
from nifiapi.flowfiletransform import FlowFileTransform, FlowFileTransformResult
from nifiapi.properties import ExpressionLanguageScope, PropertyDependency, PropertyDescriptor, StandardValidators


@use_case(description="Number the lines of a text file",
          configuration="""
              Set 'Numbering' to 'padded' and 'Width' to the number of digits wanted.
          """,
          keywords=["text", "lines"])
class NumberLines(FlowFileTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.FlowFileTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Prefixes every line of the content with its number (and an optional prefix).'
        tags = ['text', 'lines', 'example']

    PREFIX = PropertyDescriptor(
        name='Prefix',
        description='Text written before each line number; may use the FlowFile attributes.',
        default_value='',
        expression_language_scope=ExpressionLanguageScope.FLOWFILE_ATTRIBUTES,
    )
    START = PropertyDescriptor(
        name='Start',
        description='The number of the first line.',
        required=True,
        default_value='1',
        validators=[StandardValidators.INTEGER_VALIDATOR],
    )
    NUMBERING = PropertyDescriptor(
        name='Numbering',
        description='plain: 1, 2, ...; padded: zero-padded to Width digits.',
        required=True,
        default_value='plain',
        allowable_values=['plain', 'padded'],
    )
    WIDTH = PropertyDescriptor(
        name='Width',
        description='How many digits a padded number has.',
        required=True,
        default_value='4',
        validators=[StandardValidators.POSITIVE_INTEGER_VALIDATOR],
        dependencies=[PropertyDependency(NUMBERING, 'padded')],
    )

    def __init__(self, **kwargs):
        pass

    def getPropertyDescriptors(self):
        return [self.PREFIX, self.START, self.NUMBERING, self.WIDTH]

    def transform(self, context, flowfile):
        prefix = context.getProperty(self.PREFIX).evaluateAttributeExpressions(flowfile).getValue() or ''
        number = context.getProperty(self.START).asInteger()
        width = context.getProperty(self.WIDTH)  # None unless Numbering is 'padded'
        reader = flowfile.getContentsAsReader()
        lines = []
        line = reader.readLine()
        while line is not None:
            label = str(number).zfill(width.asInteger()) if width is not None else str(number)
            lines.append(f'{prefix}{label} {line}')
            number += 1
            line = reader.readLine()
        return FlowFileTransformResult(relationship='success', contents='\n'.join(lines) + '\n',
                                       attributes={'line.count': str(len(lines))})
