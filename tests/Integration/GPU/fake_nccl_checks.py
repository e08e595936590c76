"""The fake NCCL (runtime/tests/fixtures/fake_nccl.c) fails as NCCL does,
so that a runtime that misuses NCCL fails the emulated tests: run by both
ranks of `mpirun -np 2`, with the fake CUDA driver (TFC_CUDA_DRIVER), it
refuses a communicator of another rank's id or of the wrong ranks, an
unknown data type or reduction, a null or aborted communicator, null
buffers and host memory (ncclInvalidArgument, ncclInvalidUsage), an
all-reduce while one is in progress, sums device buffers over the ranks
and gathers them (refusing a buffer too small for all the ranks'). Rank 0 prints its checks, any rank its failures; a failure is exit
status 1.

usage: fake_nccl_checks.py FAKE_NCCL
"""

import ctypes
import os
import sys

SUCCESS, INVALID_ARGUMENT, INVALID_USAGE, IN_PROGRESS = 0, 4, 5, 7
FLOAT32 = 7
SUM = 0

nccl = ctypes.CDLL(sys.argv[1])
mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(os.environ["TFC_CUDA_DRIVER"])
mpi.MPI_Init(None, None)
world = ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_comm_world"))
byte = ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_byte"))
rank, size = ctypes.c_int(), ctypes.c_int()
mpi.MPI_Comm_rank(ctypes.c_void_p(world), ctypes.byref(rank))
mpi.MPI_Comm_size(ctypes.c_void_p(world), ctypes.byref(size))
rank, size = rank.value, size.value
checks, failed = 0, 0


def expect(label, got, want):
    global checks, failed
    checks += 1
    ok = got == want
    failed += not ok
    if rank == 0 or not ok:  # rank 0's checks, and any rank's failures
        print("%s %-55s got %s, want %s" % ("ok  " if ok else "FAIL", label,
                                          got, want))


class Id(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.c_int, Id, ctypes.c_int]
nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p]
nccl.ncclAllGather.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_int,
                               ctypes.c_void_p, ctypes.c_void_p]
nccl.ncclCommGetAsyncError.argtypes = [ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_int)]
nccl.ncclCommAbort.argtypes = [ctypes.c_void_p]
nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]

# Device memory of the fake driver's.
context = ctypes.c_void_p()
cuda.cuInit(0)
cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0)
cuda.cuCtxSetCurrent(context)
n = 7
buffers = []
for floats in (n, n, n * size):
    p = ctypes.c_uint64()
    cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4 * floats))
    buffers.append(p.value)
send, recv, gathered = buffers
values = (ctypes.c_float * n).from_address(send)
for i in range(n):
    values[i] = (rank + 1) * (i + 0.5)

own = Id()
nccl.ncclGetUniqueId(ctypes.byref(own))
root = Id.from_buffer_copy(own)
mpi.MPI_Bcast(ctypes.byref(root), 128, ctypes.c_void_p(byte), 0,
              ctypes.c_void_p(world))
comm = ctypes.c_void_p()
# Each rank's own id: rank 1's is not rank 0's.
r = nccl.ncclCommInitRank(ctypes.byref(comm), size, own, rank)
if rank == 1:
    expect("ncclCommInitRank of another id (rank 1)", r, INVALID_ARGUMENT)
elif r == SUCCESS:
    nccl.ncclCommAbort(comm)
expect("ncclCommInitRank of rank 2 of 2", nccl.ncclCommInitRank(
    ctypes.byref(comm), size, root, size), INVALID_ARGUMENT)
expect("ncclCommInitRank of 3 ranks in a job of 2", nccl.ncclCommInitRank(
    ctypes.byref(comm), size + 1, root, rank), INVALID_USAGE)
expect("ncclCommInitRank", nccl.ncclCommInitRank(
    ctypes.byref(comm), size, root, rank), SUCCESS)
host = (ctypes.c_float * n)()
for label, args, want in (
        ("data type 10", (send, recv, n, 10, SUM, comm), INVALID_ARGUMENT),
        ("reduction 5", (send, recv, n, FLOAT32, 5, comm), INVALID_ARGUMENT),
        ("null communicator", (send, recv, n, FLOAT32, SUM, None),
         INVALID_ARGUMENT),
        ("null buffer", (None, recv, n, FLOAT32, SUM, comm),
         INVALID_ARGUMENT),
        ("host memory", (ctypes.addressof(host), recv, n, FLOAT32, SUM,
                         comm), INVALID_ARGUMENT),
        ("beyond the allocation", (send, recv, n + 1, FLOAT32, SUM, comm),
         INVALID_ARGUMENT)):
    expect("ncclAllReduce: " + label,
           nccl.ncclAllReduce(*args, None), want)
expect("ncclAllReduce", nccl.ncclAllReduce(send, recv, n, FLOAT32, SUM, comm,
                                           None), SUCCESS)
expect("ncclAllReduce while one is in progress", nccl.ncclAllReduce(
    send, recv, n, FLOAT32, SUM, comm, None), INVALID_USAGE)
state = ctypes.c_int(IN_PROGRESS)
while state.value == IN_PROGRESS:
    nccl.ncclCommGetAsyncError(comm, ctypes.byref(state))
expect("ncclCommGetAsyncError once done", state.value, SUCCESS)
sums = (ctypes.c_float * n).from_address(recv)
want = [sum(r + 1 for r in range(size)) * (i + 0.5) for i in range(n)]
expect("the sum over the ranks", list(sums), want)
expect("ncclAllGather into one rank's floats", nccl.ncclAllGather(
    send, recv, n, FLOAT32, comm, None), INVALID_ARGUMENT)
expect("ncclAllGather", nccl.ncclAllGather(send, gathered, n, FLOAT32, comm,
                                           None), SUCCESS)
state = ctypes.c_int(IN_PROGRESS)
while state.value == IN_PROGRESS:
    nccl.ncclCommGetAsyncError(comm, ctypes.byref(state))
parts = (ctypes.c_float * (n * size)).from_address(gathered)
expect("the ranks' floats one after another", list(parts),
       [(r + 1) * (i + 0.5) for r in range(size) for i in range(n)])
expect("ncclCommAbort", nccl.ncclCommAbort(comm), SUCCESS)
expect("ncclAllReduce of an aborted communicator", nccl.ncclAllReduce(
    send, recv, n, FLOAT32, SUM, comm, None), INVALID_ARGUMENT)
expect("ncclCommDestroy of an aborted communicator",
       nccl.ncclCommDestroy(comm), INVALID_ARGUMENT)
if rank == 0:
    print("%d passed, %d failed" % (checks - failed, failed))
mpi.MPI_Finalize()
sys.exit(1 if failed else 0)
