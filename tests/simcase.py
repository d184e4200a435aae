"""Shared by the simulator case scripts (tests/sim_*_cases.py): what each bad call raised."""


def outcomes(cases):
    """{name: [exception type name, message]} for each call in ``cases`` (name -> callable);
    ``["no error", ""]`` where the call returned."""
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = ["no error", ""]
        except Exception as e:  # noqa: BLE001 - the test inspects the type
            out[name] = [type(e).__name__, str(e)]
    return out
