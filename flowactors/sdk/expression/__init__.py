"""The attribute expression language: NiFi Expression Language, without a JVM.

A property value mixes literal text and ``${...}`` expressions, e.g. ``out/${filename:toUpper()}``.
``compile_value`` parses it once (cached), reporting every error in the text before any FlowFile
is processed; ``CompiledValue.evaluate`` walks the parsed tree. ``parser`` holds the syntax,
``language`` the values and the function registry, ``functions`` the function library (one module
a section of NiFi's guide).
docs/expression-language.md is the user documentation, with the coverage table against NiFi's, and
the bound on what one evaluation may produce (``MAX_EVALUATION_CHARS``, ``ExpressionLimitError``).
"""

from flowactors.sdk.expression import functions  # each of its modules registers its functions
from flowactors.sdk.expression.language import MAX_EVALUATION_CHARS, ExpressionError, ExpressionLimitError
from flowactors.sdk.expression.parser import CompiledValue, compile_value

__all__ = ["MAX_EVALUATION_CHARS", "CompiledValue", "ExpressionError", "ExpressionLimitError", "compile_value",
           "functions"]
