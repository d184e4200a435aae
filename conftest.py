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
