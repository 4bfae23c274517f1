"""shared/elicit_params.py: MCP's ElicitRequestParams read once into a typed value."""

import pytest

from shared.elicit_params import FormParams, UrlParams, read_params
from shared.errors import UndeliverableRequestError

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def test_a_form_with_or_without_its_mode_and_a_url_with_or_without_an_id() -> None:
    form = read_params({"message": "Name?", "requestedSchema": SCHEMA, "_meta": {"k": 1}})  # MCP: no mode is a form
    assert form == FormParams(message="Name?", requested_schema=SCHEMA) and form.mode == "form"
    assert read_params({"mode": "form", "message": "Name?", "requestedSchema": SCHEMA}) == form
    url = read_params({"mode": "url", "message": "Sign in", "url": "https://x.test/", "elicitationId": "e1"})
    assert url == UrlParams(message="Sign in", url="https://x.test/", elicitation_id="e1") and url.mode == "url"
    no_id = read_params({"mode": "url", "message": "Open", "url": "https://x.test/"})
    assert isinstance(no_id, UrlParams) and no_id.elicitation_id is None


@pytest.mark.parametrize(("params", "says"), [
    ({"mode": "sms", "message": "?"}, "neither 'form' nor 'url'"),
    ({"mode": None, "message": "?"}, "neither 'form' nor 'url'"),
    ({"mode": "form", "message": 3, "requestedSchema": SCHEMA}, "Expected `str`, got `int` - at `$.message`"),
    ({"mode": "form", "message": "?"}, "missing required field `requestedSchema`"),
    ({"mode": "url", "message": "?", "url": ["https://x.test/"]}, "at `$.url`"),
])
def test_anything_else_is_refused_with_what_is_wrong(params: dict[str, object], says: str) -> None:
    with pytest.raises(UndeliverableRequestError) as refused:
        read_params(params)
    assert says in str(refused.value)
