"""How long the causal attention grid takes with its query blocks in index
order or reversed (what the kernels do), by a model of the block
scheduler, with no GPU: blocks start in index order on the first free
block slot (132 SMs x blocks per SM), each taking a time proportional to
its key tiles. Prints each order's makespan against the ideal (all slots
busy to the end). A model: tiles are not equally long on a GPU (the
diagonal tile masks, the first loads miss), and blocks of one SM share
its tensor cores.

usage: causal_schedule.py [--sms 132]
"""

import argparse
import heapq


def makespan(work, slots):
    """List scheduling in order: each block on the earliest free slot."""
    free = [0] * slots
    for w in work:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sms", type=int, default=132)
    a = p.parse_args()
    print("| S | rows per block | keys per tile | blocks per SM | ideal "
          "(tiles per slot) | index order | reversed |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    heads = 4 * 16  # B x H on grid x: blockIdx.x varies fastest
    for s, rows, keys, per_sm in ((1024, 128, 128, 1), (4096, 128, 128, 1),
                                  (16384, 128, 128, 1), (4096, 64, 128, 2),
                                  (4096, 64, 64, 2)):
        blocks = s // rows
        tiles = [-(-(q + 1) * rows // keys) for q in range(blocks)]
        natural = [tiles[y] for y in range(blocks) for _ in range(heads)]
        reverse = [tiles[blocks - 1 - y] for y in range(blocks)
                   for _ in range(heads)]
        slots = a.sms * per_sm
        ideal = sum(natural) / slots

        def cell(order):
            t = makespan(order, slots)
            return "%d (+%.1f%%)" % (t, 100 * (t / ideal - 1))
        print("| %d | %d | %d | %d | %.1f | %s | %s |" % (
            s, rows, keys, per_sm, ideal, cell(natural), cell(reverse)))


if __name__ == "__main__":
    main()
