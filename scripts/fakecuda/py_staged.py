import ctypes, time, numpy as np
from mpi4py import MPI
import pyddstore as dds
fc = ctypes.CDLL("libcuda.so.1")
fc.fake_dev_alloc.restype = ctypes.c_void_p
fc.fake_dev_alloc.argtypes = [ctypes.c_size_t]
fc.fake_dev_read.argtypes = fc.fake_dev_write.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
comm = MPI.COMM_WORLD
class Dev:
    def __init__(self, shape, typestr="<f4"):
        n = int(np.prod(shape)) * np.dtype(typestr).itemsize
        self.ptr, self.n = fc.fake_dev_alloc(n), n
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (self.ptr, False), "version": 3}
    def numpy(self, shape, dt=np.float32):
        out = np.empty(shape, dt); fc.fake_dev_read(out.ctypes.data, self.ptr, self.n); return out
for method in (0, 1):
    s = dds.PyDDStore(comm, method=method)
    src = Dev((8, 4)); fc.fake_dev_write(src.ptr, np.full((8, 4), comm.rank + 1, np.float32).ctypes.data, 128)
    s.add("x", src)
    comm.Barrier()
    d = Dev((8, 4))
    for r in range(comm.size):
        s.get("x", d, r * 8)
        assert (d.numpy((8, 4)) == r + 1).all()
    idx = np.array([(i * 3) % (8 * comm.size) for i in range(8)])
    s.get_batch("x", d, idx)
    assert (d.numpy((8, 4))[:, 0] == idx // 8 + 1).all()
    fc.fake_dev_write(d.ptr, np.zeros((8, 4), np.float32).ctypes.data, 128)
    req = s.get_batch_async("x", d, idx[::-1].copy())  # rows reach the device at wait
    for _ in range(3000):  # at most 30 s: a request that never completes fails
        if req.done():
            break
        time.sleep(0.01)
    assert req.done(), "request not done after 30 s"
    assert (d.numpy((8, 4)) == 0).all()
    req.wait()
    assert (d.numpy((8, 4))[:, 0] == idx[::-1] // 8 + 1).all()
    s.register_recv("x", d)
    s.update("x", src, 0)
    try:
        s.get("x", Dev((8, 4), "<f8"), 0); raise SystemExit("itemsize not checked")
    except dds.MismatchError:
        pass
    s.free()
print(comm.rank, "py staged ok")
