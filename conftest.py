# tests/sim_*_cases.py are scripts the tests run in a child process under numba's CUDA
# simulator (which must be chosen before numba is imported): not test modules.
collect_ignore_glob = ["tests/sim_*_cases.py"]
