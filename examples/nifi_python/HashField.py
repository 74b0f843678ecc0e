# A NiFi 2 Python record transform: replaces one field of each record, named by a dotted path
# into nested records ('customer.address.street'), with the SHA-256 of its text, and hands the
# reader's schema back with the record. A path that finds nothing, a null, or a record or array
# leaves the record as it is (logged); a number is hashed as its JSON text ('7').
import hashlib
import json

from nifiapi.properties import PropertyDescriptor, StandardValidators
from nifiapi.recordtransform import RecordTransform, RecordTransformResult


class HashField(RecordTransform):
    class Java:
        implements = ['org.apache.nifi.python.processor.RecordTransform']

    class ProcessorDetails:
        version = '1.0.0'
        description = 'Replaces a field, found by a dotted path, with the SHA-256 of its value.'
        tags = ['records', 'hash', 'example']

    FIELD_PATH = PropertyDescriptor(name='Field Path', description="The field to hash: names joined by '.'",
                                    required=True, validators=[StandardValidators.NON_EMPTY_VALIDATOR])

    def __init__(self, **kwargs):
        super().__init__()

    def getPropertyDescriptors(self):
        return [self.FIELD_PATH]

    def transform(self, context, record, schema, attributemap):
        path = context.getProperty(self.FIELD_PATH).getValue().strip()
        *parents, name = path.split('.')
        holder = record
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        value = holder.get(name) if isinstance(holder, dict) else None
        if value is None or isinstance(value, (dict, list)):
            self.logger.warn('Field Path {} finds no text or number; record left as it is', path)
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            holder[name] = hashlib.sha256(text.encode('utf-8')).hexdigest()
        return RecordTransformResult(record=record, schema=schema, relationship='success')
