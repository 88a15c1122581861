"""The body of `POST /correct`, read once, at a bounded cost whatever it holds.

`read_correct_request(body, settings)` gives the `CorrectRequest` to correct, or raises a
`RequestError` (status + the problems, at most `MAX_ERRORS` of them) that the app answers as
is. Nothing else parses a JSON body: the app's `CorrectRequests` step calls it for every JSON
request to `/correct`, and the route only sees what is not JSON (415).

Cost: a hostile body within the byte limit (4 MiB) must not hold the event loop. `json.loads`
of `{"texts": [0, 0, …]}` with 1,000,000 items takes 30 ms and its validation 34 ms more (2
cores), and each of its 1,000,000 problems used to become an error item: 16 s and a 93 MB
answer. So a body with more than `FAST_PARSE_VALUES` commas and brackets (an upper bound on its
JSON values) is first walked by ijson's C parser, which stops at the first limit it passes —
the 65th text, the 21st unknown field, nesting deeper than any request has — at 1.4 ms for
that body. A legitimate body with that many commas has them in its texts; it passes the walk
and is parsed as any other.
"""

from __future__ import annotations

import json
from typing import Any

import ijson
from pydantic import ValidationError

from .schemas import MAX_ERRORS, CorrectRequest, ErrorItem, capped, find_text_problems, sanitize

MAX_ECHO = 64  # characters of the client's own input (a field name) repeated in an answer
# Bodies with at most this many commas and brackets (so at most this many JSON values, ~1 ms of
# json.loads and validation) skip the ijson walk; a legitimate request has a few.
FAST_PARSE_VALUES = 4096
MAX_DEPTH = 32  # a request is 3 deep ({"texts": ["…"]}); deeper is refused unparsed
FIELDS = frozenset(CorrectRequest.model_fields)
# Messages for pydantic error types whose default wording does not say what to fix.
CLEARER = {
    "string_unicode": "body is not valid Unicode (e.g. a lone surrogate escape such as \\ud800 in a key)",
    "model_attributes_type": "body must be a JSON object such as {\"text\": \"...\"}",
}


class RequestError(Exception):
    """A request that cannot be corrected, answered `status` with `errors`."""

    status = 422  # each subclass's

    def __init__(self, errors: list[ErrorItem]) -> None:
        super().__init__(errors[0].msg if errors else "bad request")
        self.errors = errors


class InputError(RequestError):
    """Content problems of a well-formed request, answered as one 422 listing them."""


class RequestTooCostly(RequestError):
    """A well-formed request with more characters in all than one request may cost (413)."""

    status = 413


class BadBody(RequestError):
    """A body that is not JSON at all: empty, malformed, too deep, a number too long (400)."""

    status = 400


def echo(value: Any) -> Any:
    """A value of the client's (a field name) safe to repeat: valid UTF-8, at most MAX_ECHO characters."""
    if isinstance(value, str) and len(value) > MAX_ECHO:
        value = value[:MAX_ECHO] + f"… ({len(value)} characters)"
    return sanitize(value)


def read_correct_request(body: bytes, settings) -> CorrectRequest:
    """The request in `body` (UTF-8 JSON), checked against `settings`' limits; RequestError
    (400, 413 or 422) for anything that must not be corrected."""
    if not body.strip():
        raise BadBody([ErrorItem(loc=["body"], type="empty_body",
                                 msg='request body is empty; send a JSON object such as {"text": "..."}')])
    if body.count(b",") + body.count(b"[") + body.count(b"{") > FAST_PARSE_VALUES:
        walk_structure(body, settings.max_texts)
    data = parse_json(body)
    if not isinstance(data, dict):
        raise InputError([ErrorItem(loc=["body"], type="model_attributes_type", msg=CLEARER["model_attributes_type"])])
    try:
        request = CorrectRequest.model_validate(data)
    except ValidationError as exc:
        raise InputError(validation_errors(exc.errors(include_url=False, include_input=False))) from None
    check_request(request, settings)
    return request


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as err:
        raise BadBody([ErrorItem(loc=["body"], type="json_invalid",
                                 msg=f"invalid JSON at line {err.lineno} column {err.colno} "
                                     f"(character {err.pos}): {err.msg}")]) from None
    except RecursionError:
        raise BadBody([ErrorItem(loc=["body"], type="invalid_body", msg="JSON body is nested too deeply")]) from None
    except ValueError as err:  # Python refuses integers of more than 4300 digits (CVE-2020-10735)
        raise BadBody([ErrorItem(loc=["body"], type="invalid_body",
                                 msg=f"a number in the JSON body is too long ({err})")]) from None


def validation_errors(errors: list[dict]) -> list[ErrorItem]:
    """pydantic's errors of a body as ErrorItems located under "body", client input shortened,
    at most MAX_ERRORS."""
    items = []
    for error in errors[:MAX_ERRORS]:
        kind = str(error.get("type", "invalid"))
        # value_error: the model's own check (exactly one of text / texts), about the whole body.
        loc = ["body"] if kind == "value_error" else ["body", *(echo(p) for p in error.get("loc", ()))]
        msg = CLEARER.get(kind) or str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        items.append(ErrorItem(loc=loc, type=kind, msg=msg))
    return capped(items, len(errors))


def check_request(request: CorrectRequest, settings) -> None:
    """Raises InputError (the content problems) or RequestTooCostly for a request that must not
    be corrected."""
    problems = find_text_problems(request, settings.max_texts, settings.max_text_chars)
    if problems:
        raise InputError(problems)
    if (chars := sum(len(t) for t in request.all_texts())) > settings.max_request_chars:
        raise RequestTooCostly([ErrorItem(
            loc=["body", "texts" if request.is_batch else "text"], type="request_too_costly",
            msg=f"{chars} characters in all; at most {settings.max_request_chars} per request: send them "
                "in several requests")])


def walk_structure(body: bytes, max_texts: int) -> None:
    """Raises RequestError at the first sign that `body` holds more than a request can: not an
    object, more than `max_texts` values inside a field (the items of 'texts'), more than
    MAX_ERRORS fields, nesting deeper than MAX_DEPTH. Returns when none shows: json.loads then
    parses at most that many values (of any size)."""
    depth, nested, keys, key = 0, 0, [], ""
    try:
        for event, value in ijson.basic_parse(body, use_float=True, buf_size=16384):
            if event == "map_key":
                if depth == 1:
                    key = value
                    keys.append(value)
                    if len(keys) > MAX_ERRORS:
                        raise InputError(too_many_fields(keys))
                continue
            if event in ("end_map", "end_array"):
                depth -= 1
                continue
            if depth == 0 and event == "start_array":
                raise InputError([ErrorItem(loc=["body"], type="model_attributes_type",
                                            msg=CLEARER["model_attributes_type"])])
            nested += depth >= 2  # a value inside a field's value: an item of 'texts', or worse
            if nested > max_texts:
                raise InputError([too_many_values(key, max_texts)])
            if event in ("start_map", "start_array"):
                depth += 1
                if depth > MAX_DEPTH:
                    raise BadBody([ErrorItem(loc=["body"], type="invalid_body", msg="JSON body is nested too deeply")])
    except ijson.JSONError:
        return  # not JSON: json.loads says where, having read at most up to there


def too_many_fields(keys: list[str]) -> list[ErrorItem]:
    unknown = [ErrorItem(loc=["body", echo(k)], type="extra_forbidden", msg="Extra inputs are not permitted")
               for k in keys if k not in FIELDS]
    return unknown[:MAX_ERRORS] + [ErrorItem(loc=["body"], type="too_many_fields",
                                             msg=f"more than {MAX_ERRORS} fields; a request has at most "
                                                 f"{len(FIELDS)} ({', '.join(sorted(FIELDS))})")]


def too_many_values(key: str, max_texts: int) -> ErrorItem:
    if key == "texts":
        return ErrorItem(loc=["body", "texts"], type="too_many_texts",
                         msg=f"more than {max_texts} texts given; at most {max_texts} per request")
    return ErrorItem(loc=["body", echo(key)], type="too_many_values",
                     msg=f"more than {max_texts} values inside {echo(key)!r}; a request holds strings and a number")
