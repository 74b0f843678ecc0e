# A NiFi 2 Python record transform: sets fields from its dynamic properties (expressions over the
# FlowFile's attributes), drops records marked 'drop', sends negative amounts to 'rejected', and
# partitions the rest by the value of 'Partition Field' (one output FlowFile a partition).
from nifiapi.properties import ExpressionLanguageScope, PropertyDescriptor, StandardValidators
from nifiapi.recordtransform import RecordTransform, RecordTransformResult
from nifiapi.relationship import Relationship


class TagRecords(RecordTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.RecordTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Tags records, drops some, rejects others and partitions the rest by a field.'
        tags = ['records', 'example']

    PARTITION_FIELD = PropertyDescriptor(name='Partition Field', description='The field records are grouped by.',
                                         required=True, validators=[StandardValidators.NON_EMPTY_VALIDATOR])
    SUCCESS = Relationship(name='success', description='Records that were kept, one FlowFile a partition')
    REJECTED = Relationship(name='rejected', description='Records with a negative amount')

    def __init__(self, **kwargs):
        super().__init__()

    def getPropertyDescriptors(self):
        return [self.PARTITION_FIELD]

    def getDynamicPropertyDescriptor(self, name):
        return PropertyDescriptor(name=name, description=f"The value of the '{name}' field",
                                  expression_language_scope=ExpressionLanguageScope.FLOWFILE_ATTRIBUTES)

    def getRelationships(self):
        return [self.SUCCESS, self.REJECTED]

    def transform(self, context, record, schema, attributemap):
        if record.get('drop'):
            return RecordTransformResult(record=None)
        for descriptor in context.getProperties():
            if descriptor.dynamic:
                value = context.getProperty(descriptor.name).evaluateAttributeExpressions(attributemap).getValue()
                record[descriptor.name] = value
        if record.get('amount', 0) < 0:
            return RecordTransformResult(record=record, relationship='rejected')
        field = context.getProperty(self.PARTITION_FIELD).getValue()
        return RecordTransformResult(record=record, relationship='success', partition={field: record.get(field)})
