# Sourced by the device calls' scripts (benchmarks/h*_session*.sh): one thread per torch
# process, unbuffered output, which GPU and how many CPUs the call got (`ncpu`: the hosts
# have given 1 where 16 were lent), the wheels carried in .whl/ installed to /tmp/site
# (see the device tool's README), and this checkout first on PYTHONPATH.
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
nvidia-smi -L; ncpu=$(nproc); echo "nproc $ncpu"; uptime
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
export PYTHONPATH=$PWD:/tmp/site
