"""Checks brain's model-API tool definitions against the model APIs' own Python SDK code.

Run with the `.venv-models` python (setup.sh): `.venv-models/bin/python model_apis.py FILE`.
FILE holds, for each API, exactly the `tools` array its request takes:

    {"openai":      {"tools": [{"type": "function", "name", "description", "parameters", "strict"}]},
     "openai-chat": {"tools": [{"type": "function", "function": {"name", "description", "parameters", "strict"}}]},
     "anthropic":   {"tools": [{"name", "description", "input_schema"} (+ "strict": true)]},
     "gemini":      {"tools": [{"functionDeclarations": [{"name", "description", "parametersJsonSchema"}]}]}}

What is checked, against these pinned SDKs (a different installed version is an error):
- openai-agents==0.24.0: every tool with "strict": true is a fixed point of
  `agents.strict_schema.ensure_strict_json_schema`, i.e. the SDK neither raises nor changes it.
- anthropic==2.10.0: every tool with "strict": true is a fixed point of `anthropic.transform_schema`
  (anthropic/lib/_parse/_transform.py), the SDK's rewrite into the structured-outputs subset;
  and at most 20 tools are strict (the documented per-request limit).
- google-genai==3.3.0: each declaration is accepted by `types.FunctionDeclaration.model_validate`
  and each Tool by `types.Tool.model_validate` (as the SDK's own `t_tool` does with a dict), and
  dumps back, camelCase, to exactly the JSON given (nothing unknown, misnamed or dropped); at
  most 512 declarations (the SDK's documented limit). The SDK does not check the schema itself.
- OpenAI shape: "type" is "function"; a Responses tool carries both "parameters" and "strict"
  (both required in the SDK's FunctionToolParam; the API's "strict" defaults to true).
- Tool names match the documented rules: OpenAI and Anthropic `^[a-zA-Z0-9_-]{1,64}$`; Gemini
  starts with a letter or `_`, then letters, digits, `_ . : -`, 128 at most.
Comparisons are of canonical JSON, so `true` and `1`, or `1` and `1.0`, differ.

With "anthropic-alone" (each tool projected alone, past the per-request limits), every strict one
is checked the same way, without the 20-tool limit. With "mcp" (the MCP Tool objects), openai-agents'
own strict conversion of each (as agents/mcp/util.py does it) is compared with brain's "openai"
tools: the SDK's conversions that are faithful (no optional property made required without
`null`) must be strict in brain too; the counts are printed.

Prints one JSON line per API, {"api", "tools", "strict", "failures": [{"name", "error"}]}, and
exits 1 if anything failed.
"""

import copy
import importlib.metadata
import json
import re
import sys

PINS = {"openai-agents": "0.24.0", "anthropic": "2.10.0", "google-genai": "3.3.0"}
OPENAI_NAME = ANTHROPIC_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}")


def canon(value):
    return json.dumps(value, sort_keys=True)


def one_line(error):
    return " ".join(str(error).split())


def fixed_point(transform, schema):
    """None if transform(copy of schema) gives schema back, else what went wrong."""
    try:
        out = transform(copy.deepcopy(schema))
    except Exception as e:  # noqa: BLE001 - any raise is a finding
        return f"raised {type(e).__name__}: {one_line(e)}"
    return None if canon(out) == canon(schema) else f"changed to {canon(out)}"


def check_name(name, pattern, failures):
    if not isinstance(name, str) or not pattern.fullmatch(name):
        failures.append({"name": name, "error": f"name does not match {pattern.pattern}"})


def check_openai(tools, chat):
    from agents.strict_schema import ensure_strict_json_schema

    failures, strict = [], 0
    for tool in tools:
        fn = tool.get("function", {}) if chat else tool
        name = fn.get("name")
        check_name(name, OPENAI_NAME, failures)
        if tool.get("type") != "function":
            failures.append({"name": name, "error": "type is not \"function\""})
        if not chat and not {"parameters", "strict"} <= fn.keys():
            # Both are required by the Responses API (and `strict` defaults to true there).
            failures.append({"name": name, "error": "parameters and strict must both be given"})
        if fn.get("strict") is True:
            strict += 1
            error = fixed_point(ensure_strict_json_schema, fn.get("parameters"))
            if error:
                failures.append({"name": name, "error": "ensure_strict_json_schema " + error})
    return len(tools), strict, failures


def check_anthropic(tools, per_request=True):
    from anthropic import transform_schema

    failures, strict = [], 0
    for tool in tools:
        name = tool.get("name")
        check_name(name, ANTHROPIC_NAME, failures)
        if tool.get("strict") is True:
            strict += 1
            error = fixed_point(transform_schema, tool.get("input_schema"))
            if error:
                failures.append({"name": name, "error": "transform_schema " + error})
    if per_request and strict > 20:
        failures.append({"name": None, "error": f"{strict} strict tools, at most 20 per request"})
    return len(tools), strict, failures


def check_gemini(tools):
    from google.genai import types

    def round_trip(model, value):
        """None if the SDK model accepts value and dumps it back unchanged, else the problem."""
        try:
            dumped = model.model_validate(value).model_dump(
                mode="json", by_alias=True, exclude_none=True)
        except Exception as e:  # noqa: BLE001
            return f"{model.__name__}.model_validate raised {one_line(e)}"
        return None if canon(dumped) == canon(value) else f"dumps back as {canon(dumped)}"

    failures, count = [], 0
    for tool in tools:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if not isinstance(declarations, list):
            failures.append({"name": None, "error": "a Tool without functionDeclarations"})
            continue
        count += len(declarations)
        before = len(failures)
        for declaration in declarations:
            name = declaration.get("name") if isinstance(declaration, dict) else None
            check_name(name, GEMINI_NAME, failures)
            error = round_trip(types.FunctionDeclaration, declaration)
            if error:
                failures.append({"name": name, "error": error})
        error = None if len(failures) > before else round_trip(types.Tool, tool)
        if error:
            failures.append({"name": None, "error": error})
    if count > 512:
        failures.append({"name": None, "error": f"{count} declarations, at most 512"})
    return count, 0, failures


def accepts_null(schema):
    """Whether null validates against schema (jsonschema, draft 2020-12)."""
    import jsonschema

    try:
        return jsonschema.Draft202012Validator(schema).is_valid(None)
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot read: count it as accepting
        return True


def unfaithful(original, converted, pointer=""):
    """Where a strict conversion made an optional property required, if it did: without `null`
    the model must invent a value; with the original's own `null`, "absent" and `null` can no
    longer be told apart. None when the conversion is faithful."""
    if not isinstance(original, dict) or not isinstance(converted, dict):
        return None
    properties = original.get("properties")
    if isinstance(properties, dict):
        required = set(original.get("required", []))
        for name, schema in properties.items():
            after = converted.get("properties", {}).get(name)
            if name not in required and name in converted.get("required", []):
                why = "null ambiguous" if accepts_null(after or {}) else "no null"
                return f"{pointer}/properties/{name} ({why})"
            found = unfaithful(schema, after, f"{pointer}/properties/{name}")
            if found:
                return found
    if isinstance(original.get("items"), dict):
        return unfaithful(original["items"], converted.get("items"), pointer + "/items")
    return None


def compare_openai_agents(mcp_tools, brain_tools):
    """openai-agents' own strict conversion of MCP tools (agents/mcp/util.py: `properties`
    added when missing, then ensure_strict_json_schema rejecting open objects), against brain's
    strict OpenAI tools: brain must make strict every tool the SDK converts faithfully."""
    from agents.strict_schema import ensure_strict_json_schema

    brain_strict = {t["name"] for t in brain_tools if t.get("strict") is True}
    converted, faithful, missing, reasons = 0, 0, [], {}
    for tool in mcp_tools:
        schema = copy.deepcopy(tool["inputSchema"])
        empty = schema == {}
        schema.setdefault("properties", {})
        try:
            out = ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=not empty)
        except Exception:  # noqa: BLE001 - the SDK sends this tool non-strict
            continue
        converted += 1
        where = unfaithful(tool["inputSchema"], out)
        if where:
            reason = where.rsplit("(", 1)[1].rstrip(")")
            reasons[reason] = reasons.get(reason, 0) + 1
        else:
            faithful += 1
            if tool["name"] not in brain_strict:
                missing.append({"name": tool["name"], "error": "openai-agents makes it strict faithfully; brain does not"})
    return {"api": "openai-agents", "converted": converted, "faithful": faithful,
            "unfaithful": converted - faithful, "unfaithful_by_reason": reasons,
            "brain_strict": len(brain_strict),
            "failures": missing}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: model_apis.py TOOLS.json")
    for package, pinned in PINS.items():
        installed = importlib.metadata.version(package)
        if installed != pinned:
            sys.exit(f"{package} {installed} is installed, the checks are pinned to {pinned}")
    with open(sys.argv[1], encoding="utf-8") as f:
        data = json.load(f)

    failed = False
    for api in ("openai", "openai-chat", "anthropic", "gemini"):
        tools = data.get(api, {}).get("tools")
        if not isinstance(tools, list):
            count, strict, failures = 0, 0, [{"name": None, "error": f"no {api}.tools array"}]
        elif api == "gemini":
            count, strict, failures = check_gemini(tools)
        elif api == "anthropic":
            count, strict, failures = check_anthropic(tools)
        else:
            count, strict, failures = check_openai(tools, chat=api == "openai-chat")
        failed |= bool(failures)
        print(json.dumps({"api": api, "tools": count, "strict": strict, "failures": failures}))
    if isinstance(data.get("anthropic-alone", {}).get("tools"), list):
        # Each tool projected alone, past the per-request limits: every strict one a fixed point.
        count, strict, failures = check_anthropic(data["anthropic-alone"]["tools"], per_request=False)
        failed |= bool(failures)
        print(json.dumps({"api": "anthropic-alone", "tools": count, "strict": strict, "failures": failures}))
    if isinstance(data.get("mcp", {}).get("tools"), list):
        report = compare_openai_agents(data["mcp"]["tools"], data["openai"]["tools"])
        failed |= bool(report["failures"])
        print(json.dumps(report))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
