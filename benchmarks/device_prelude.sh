# Sourced by the device calls' scripts (benchmarks/h*_session*.sh): which GPU and how many
# CPUs the call got (`ncpu`), one thread per torch process, unbuffered output, the wheels
# carried in .whl/ installed to /tmp/site (see the device tool's README), and this checkout
# first on PYTHONPATH. The CPUs are counted with OMP_NUM_THREADS unset: GNU nproc prints
# OMP_NUM_THREADS where it is set, so with it exported first every call read "nproc 1"
# (sessions 46-59 took that for a one-CPU host and skipped the CPU lanes).
ncpu=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
nvidia-smi -L; echo "nproc $ncpu (CPUs this call may run on)"; uptime
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
export PYTHONPATH=$PWD:/tmp/site
