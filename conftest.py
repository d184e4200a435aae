import importlib.util

# tests/sim_*_cases.py are scripts the tests run in a child process under numba's CUDA
# simulator (which must be chosen before numba is imported), and collective_cases.py, which
# starts processes with torch.distributed: not test modules.
collect_ignore_glob = ["tests/sim_*_cases.py", "tests/collective_cases.py"]
# gemm/torch.py registers a torch operator on import: its doctests need torch
# (tests/test_torch_op.py says when it is skipped).
if importlib.util.find_spec("torch") is None:
    collect_ignore_glob.append("gemm/torch.py")
# layoutalg/gemm/__init__.py is the deprecated re-export of gemm (importing it warns): gemm's
# doctests run from gemm/ itself.
collect_ignore_glob.append("layoutalg/gemm/__init__.py")

# The longest tests (the Hopper kernels' simulator suites and the import check, a minute or
# more each on CI's two cores) first: pytest-xdist then runs them side by side from the
# start, not one alone at the end while the other worker idles.
LONGEST = ("tests/test_fp8.py::test_scaled_matmul_matches_float64_in_the_simulator",
           "tests/test_hopper_cute.py::test_cute_hopper_matches_float64_in_the_simulator",
           "tests/test_import_graph.py::test_each_gemm_module_imports_on_its_own",
           "tests/test_cute_pallas.py::test_pipelines_are_exact_in_the_simulator")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))
