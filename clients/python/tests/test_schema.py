"""The SDK's models follow api/openapi.json."""

import json

import spool
from conftest import REPO


def _schemas():
    with open(REPO / "api" / "openapi.json") as f:
        return json.load(f)["components"]["schemas"]


def test_job_knows_every_field_of_the_contract():
    wire = set(_schemas()["Job"]["properties"])
    missing = wire - spool.JOB_FIELDS
    assert not missing, f"api/openapi.json's Job has fields spool.Job does not know: {sorted(missing)}"
    extra = spool.JOB_FIELDS - wire
    assert not extra, f"spool.Job has fields the contract's Job lacks: {sorted(extra)}"


def test_job_spec_covers_every_enqueue_option():
    wire = set(_schemas()["EnqueueRequest"]["properties"])
    import dataclasses
    ours = {f.name for f in dataclasses.fields(spool.JobSpec)}
    assert wire == ours


def test_one_error_class_per_code():
    codes = set(_schemas()["ErrorCode"]["enum"])
    from spool.errors import ERRORS_BY_CODE
    assert codes == set(ERRORS_BY_CODE)
    for code, cls in ERRORS_BY_CODE.items():
        assert issubclass(cls, spool.SpoolError) and cls.code == code


def test_typed_declarations_match_the_shared_methods():
    """Client and AsyncClient declare each method of _Base for type checkers
    (under TYPE_CHECKING); the declarations must follow the methods."""
    import ast
    import inspect

    from spool import client

    tree = ast.parse(inspect.getsource(client))
    shared = {n: inspect.signature(f) for n, f in vars(client._Base).items()
              if not n.startswith("_") and callable(f)}
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in ("Client", "AsyncClient")):
            continue
        [block] = [s for s in cls.body if isinstance(s, ast.If)
                   and getattr(s.test, "id", "") == "TYPE_CHECKING"]
        declared = {}
        for fn in block.body:
            assert isinstance(fn, ast.AsyncFunctionDef if cls.name == "AsyncClient" else ast.FunctionDef)
            a = fn.args
            declared[fn.name] = ([x.arg for x in a.args], [x.arg for x in a.kwonlyargs],
                                 a.kwarg.arg if a.kwarg else None)
        assert set(declared) == set(shared), cls.name
        for name, sig in shared.items():
            ps = list(sig.parameters.values())
            want = ([p.name for p in ps if p.kind == p.POSITIONAL_OR_KEYWORD],
                    [p.name for p in ps if p.kind == p.KEYWORD_ONLY],
                    next((p.name for p in ps if p.kind == p.VAR_KEYWORD), None))
            assert declared[name] == want, f"{cls.name}.{name}"
