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
