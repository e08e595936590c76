"""Execution contexts through Python (tfc_runtime.Context): contexts of one
loaded model run at once on threads, each at a shape of its own, and give
what the model gives alone.

  contexts.py LIBTFCRT MODEL_SO WEIGHTS

MODEL_SO is a BERT built for batch sizes 1, 2 and lengths 4, 8. Checked:
  - three contexts on three threads, each running its own batch size and
    length (1 x 3, 2 x 8, 2 x 5: padded or not) 20 times: every output is
    bit for bit the model's own output for those inputs;
  - while contexts exist, binding the weights again is refused, and after
    they are closed it works;
  - a closed context refuses to run; a model closed before its contexts
    keeps serving them.
"""
import os
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
from tfc_testing.checks import Checks  # noqa: E402

checks = Checks()
expect = checks.expect


def main():
    lib, path, weights = sys.argv[1:4]
    rt = tfc.load_runtime(lib)
    model = tfc.Model(path, weights=weights, runtime=rt)
    vocab = model.inputs[0].bounds[1]
    rng = np.random.default_rng(5)
    requests = []
    for batch, length in [(1, 3), (2, 8), (2, 5)]:
        ids = rng.integers(0, vocab, (batch, length)).astype(np.int64)
        mask = np.ones((batch, length), np.int64)
        mask[-1, length // 2:] = 0
        requests.append((ids, mask))
    # Inputs the model takes, by name (token_type_ids where it has them).
    names = [t.name for t in model.inputs]

    def feed(ids, mask):
        given = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.zeros_like(ids)}
        return {n: given[n] for n in names}

    wanted = [model.run(**feed(*r)) for r in requests]
    contexts = [model.context() for _ in requests]
    wrong = [0] * len(requests)

    def serve(i):
        for _ in range(20):
            got = contexts[i].run(**feed(*requests[i]))
            wrong[i] += not all(np.array_equal(g, w)
                                for g, w in zip(got, wanted[i]))

    threads = [threading.Thread(target=serve, args=(i,))
               for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect("3 contexts x 20 runs at shapes 1x3, 2x8, 2x5: %s wrong" % wrong,
           wrong == [0, 0, 0])
    checks.refused("binding weights under contexts is refused",
                   lambda: model.bind_weights(weights), tfc.Error,
                   lambda e: e.code == "FAILED_PRECONDITION" and
                   "3 contexts" in str(e))
    for c in contexts[1:]:
        c.close()
    checks.refused("a closed context refuses to run",
                   lambda: contexts[1].run(**feed(*requests[1])), tfc.Error,
                   lambda e: e.code == "FAILED_PRECONDITION" and
                   "closed" in str(e))
    model.close()
    got = contexts[0].run(**feed(*requests[0]))
    expect("a context outlives its model's close",
           all(np.array_equal(g, w) for g, w in zip(got, wanted[0])))
    contexts[0].close()
    again = tfc.Model(path, weights=weights, runtime=rt)
    with again.context() as c:
        c.run(**feed(*requests[0]))
    again.bind_weights(weights)
    expect("weights bound again once the contexts are closed", True)
    print("%d failed" % checks.failed)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
