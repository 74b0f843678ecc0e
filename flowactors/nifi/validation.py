"""Validating a NiFi Python processor's configuration as NiFi does, one sentence a problem.

NiFi checks each property whose dependencies are met: a required one must have a value (or a
default), a value must be one of the allowable values, and must pass each validator, where a
value holding an expression passes the validators that defer to evaluation. Only when all of
that holds does it call the processor's ``customValidate``; its results with ``valid=False`` are
problems too.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from flowactors.sdk.expression import ExpressionError, compile_value
from nifiapi.properties import (ExpressionLanguageScope, ValidationContext, Validator, dependencies_satisfied,
                                expression_scope)


def property_problems(descriptors: Sequence[Any], values: Mapping[str, str]) -> list[str]:
    """The problems of ``values`` (configured values by name) against ``nifiapi`` descriptors."""
    by_name = {d.name: d for d in descriptors}
    effective = {name: values.get(name) if values.get(name) is not None else d.defaultValue
                 for name, d in by_name.items()}
    problems = []
    for name, descriptor in by_name.items():
        if not dependencies_satisfied(descriptor, by_name, effective):
            continue
        value = effective[name]
        if value is None:
            if descriptor.required:
                problems.append(f"property '{name}' is required")
            continue
        problems.extend(_value_problems(descriptor, value))
    return problems


def _value_problems(descriptor: Any, value: str) -> list[str]:
    name = descriptor.name
    expression = False
    if expression_scope(descriptor) != ExpressionLanguageScope.NONE:
        try:
            expression = not compile_value(value).is_literal
        except ExpressionError as err:
            return [f"property '{name}': {err}"]
    allowed = descriptor.allowableValues
    if allowed is not None and not expression and value not in [str(v) for v in allowed]:
        return [f"property '{name}' is {value!r}; allowed: {', '.join(map(str, allowed))}"]
    if descriptor.controllerServiceDefinition:
        return []   # a service's name: the flow checks it is one in reach, of that API
    problems = []
    for validator in descriptor.validators or ():
        if isinstance(validator, Validator):
            problem = validator.problem(value, expression)
            if problem:
                problems.append(f"property '{name}': {problem}")
    return problems


def custom_problems(processor: Any, host: Any) -> list[str]:
    """The problems ``processor.customValidate`` reports for the configuration ``host`` holds."""
    try:
        results = processor.customValidate(ValidationContext(host))
        if results is None:
            raise TypeError("it returned None; it must return a list of ValidationResult (empty when valid)")
        return [f"{r.subject}: {r.explanation}" if r.subject else str(r.explanation)
                for r in results if not r.valid]
    except Exception as err:
        return [f"customValidate failed: {type(err).__name__}: {err}"]
