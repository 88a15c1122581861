"""Request/response schemas and the content checks that need the configured limits.

Structure (types, unknown fields, exactly one of `text`/`texts`, threshold range) is checked by
pydantic. Content (length, count, control characters, lone surrogates) is checked by
`find_text_problems`, because its limits come from `Settings` at run time and because a batch
must report *every* bad index at once, not just the first.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, Strict, WithJsonSchema, model_validator

# C0/C1 control characters other than tab, newline and carriage return. Those three are normal
# in pasted multi-line text and are kept byte-for-byte by the tokenizer; the rest are almost
# always binary garbage or encoding accidents, and some (NUL) break downstream tools.
_BAD_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# JSON "\ud800" decodes to a lone surrogate in Python; it cannot be encoded as UTF-8, so it
# would fail only when the response is written (a 500) unless rejected here.
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_ERRORS = 20  # problems listed in one error answer; the rest are counted


def _offsets(pattern: re.Pattern, text: str) -> list[int]:
    """Where `pattern` matches in `text`; a regex scan, not a Python loop per character, because
    it runs on the event loop (a 10,000-character text: ~20 us against ~2 ms)."""
    return [m.start() for m in pattern.finditer(text)] if pattern.search(text) else []


class CorrectRequest(BaseModel):
    """Either one text or a list of texts, plus an optional detection threshold."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": "少先队员因该为老人让坐。"},
                {"texts": ["少先队员因该为老人让坐。", "今天天气很好。"], "threshold": 0.5},
            ]
        },
    )

    # Items are typed Any on purpose: a wrong type is then reported by `find_text_problems`
    # together with every other per-text problem, so one 422 lists *every* bad index instead of
    # stopping at the type errors. The OpenAPI schema still says "string".
    text: Annotated[Any, WithJsonSchema({"type": "string"})] = Field(None, description="One text to correct.")
    texts: Annotated[list[Any], WithJsonSchema({"type": "array", "items": {"type": "string"}})] | None = Field(
        None, description="Several texts; results come back as a list in the same order."
    )
    # Strict: a JSON number only; true and "0.5" would otherwise be coerced to 1.0 and 0.5.
    threshold: Annotated[float, Strict()] | None = Field(
        None,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Detection threshold in [0, 1] for this request; omitted = the model's default.",
    )

    @model_validator(mode="after")
    def _exactly_one_input(self) -> CorrectRequest:
        # Given, not just non-null: {"text": "…", "texts": null} names two inputs and is refused.
        given = self.model_fields_set & {"text", "texts"}
        if len(given) != 1 or (self.text is None and self.texts is None):
            raise ValueError("give exactly one of 'text' (a string) or 'texts' (a list of strings)")
        return self

    @property
    def is_batch(self) -> bool:
        return self.texts is not None

    def all_texts(self) -> list[Any]:
        """The texts as given; all strings once `find_text_problems` found nothing."""
        return list(self.texts) if self.texts is not None else [self.text]


class EditOut(BaseModel):
    position: int = Field(description="0-based character (code point) offset in `source`.")
    source: str = Field(description="The character found at `position`.")
    target: str = Field(description="The character it was replaced with.")
    confidence: float = Field(description="Scorer confidence in [0, 1].")
    kind: str = Field(description="Confusion relation: pinyin, shape or other.")


class CorrectResponse(BaseModel):
    source: str
    target: str
    edits: list[EditOut]
    elapsed_ms: float = Field(description="Server time for the whole request, queueing included.")


class ErrorItem(BaseModel):
    loc: list[str | int] = Field(description='Where the problem is, e.g. ["body", "texts", 3].')
    type: str = Field(description="Machine-readable problem code, e.g. text_too_long.")
    msg: str


class ErrorResponse(BaseModel):
    detail: str = Field(description="One human-readable sentence naming every problem.")
    errors: list[ErrorItem] = Field(default_factory=list)


class HealthResponse(BaseModel):
    status: str  # "ok"; "degraded" while a correction process restarts; "unavailable" (503)
    ready: bool
    model: str | None  # the model directory's name (not its path on the server), or hub id
    precision: str | None = None  # how the networks run: "int8", "bf16" or "fp32"
    runtime: str | None = None  # what runs their encoders: "onnxruntime" or "torch"
    processes: int = 0  # correction processes holding the model (0: this process holds it)
    ready_processes: int = 0  # of those, alive and loaded now
    version: str
    batching: bool
    max_batch_size: int
    max_wait_ms: float


def find_text_problems(request: CorrectRequest, max_texts: int, max_text_chars: int) -> list[ErrorItem]:
    """The content problems of a structurally valid request (`capped`); empty when it can be corrected. Too many texts is the only
    problem reported for a request that has them: its items are not looked at.

    Empty strings, whitespace and emoji-only texts are legitimate: they come back unchanged.
    """
    if request.texts is not None and len(request.texts) > max_texts:
        return [ErrorItem(loc=["body", "texts"], type="too_many_texts",
                          msg=f"{len(request.texts)} texts given; at most {max_texts} per request")]
    problems: list[ErrorItem] = []
    for index, text in enumerate(request.all_texts()):
        loc: list[str | int] = ["body", "texts", index] if request.is_batch else ["body", "text"]
        problems += _text_problems(text, loc, max_text_chars)
    return capped(problems)


def capped(errors: list[ErrorItem], total: int | None = None) -> list[ErrorItem]:
    """The first MAX_ERRORS of `errors`, and one item counting the rest (of `total`, where the
    caller stopped listing them early): an answer stays small whatever the request held."""
    total = len(errors) if total is None else total
    if total <= MAX_ERRORS:
        return errors
    return errors[:MAX_ERRORS] + [ErrorItem(loc=["body"], type="more_errors",
                                            msg=f"{total - MAX_ERRORS} more problem(s) not listed")]


def _text_problems(text: Any, loc: list[str | int], max_text_chars: int) -> list[ErrorItem]:
    if not isinstance(text, str):
        return [ErrorItem(loc=loc, type="string_type", msg=f"expected a string, got {_json_type(text)}")]
    problems = []
    if len(text) > max_text_chars:
        problems.append(ErrorItem(loc=loc, type="text_too_long",
                                  msg=f"text has {len(text)} characters; the limit is {max_text_chars}"))
    if controls := _offsets(_BAD_CONTROL, text):
        problems.append(ErrorItem(loc=loc, type="control_character",
                                  msg=f"control character(s) at position(s) {_positions(controls)}; only tab, "
                                      "newline and carriage return are allowed"))
    if surrogates := _offsets(_SURROGATE, text):
        problems.append(ErrorItem(loc=loc, type="lone_surrogate",
                                  msg=f"unpaired UTF-16 surrogate(s) at position(s) {_positions(surrogates)}; "
                                      "text must be valid Unicode"))
    return problems


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object",
             type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _positions(indexes: list[int], shown: int = 5) -> str:
    text = ", ".join(str(i) for i in indexes[:shown])
    return text + (f" and {len(indexes) - shown} more" if len(indexes) > shown else "")


def summarize(errors: list[ErrorItem], limit: int = 5) -> str:
    """'body.texts.2: msg; body.texts.5: msg' for the `detail` sentence."""
    parts = [".".join(str(p) for p in e.loc) + ": " + e.msg for e in errors[:limit]]
    more = f" (and {len(errors) - limit} more)" if len(errors) > limit else ""
    return "; ".join(parts) + more


def sanitize(value: Any) -> Any:
    """Make user-controlled strings (e.g. an unknown field name) safe to encode as UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value
