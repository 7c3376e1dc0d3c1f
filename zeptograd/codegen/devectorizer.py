"""Devectorize: the vectors `expand` made, narrowed to what the target renders.

A renderer says how many lanes it can give an op (`max_lanes(op, dtype)`: for the C renderer, one vector
register's worth: 16 float32 or int32 lanes and 8 float64 or int64 with AVX-512, 8 and 4 with AVX2; 1 for ops it
only has as scalar code).
Each vector node becomes a list of chunks of at most that many lanes (a power of two that divides the width):

- a LOAD or STORE through addresses `i, i+1, ..., i+w-1` with no gate, or one gate for all of them, is one
  vector access at `i`; a LOAD through `i, i+2, ..., i+2(w-1)` (every other element: a pooling window's stride,
  `x[::2]`) is two vector loads that cover them, at `i` and at `i+w-1` (so the second ends at the last lane and
  reads nothing past it), and the lanes picked from the two (a VECTORIZE of GEPs of two vectors: one shuffle in
  C); a LOAD through one contiguous run whose lanes have gates of their own (a padded row's first and last
  vectors) is one masked vector load where the target has them (`masked_load`: AVX-512, AVX2); a LOAD whose
  lanes fall into runs of neighbouring addresses in another order (a transposing copy's tile) loads each run as a
  vector (masked where its lanes have gates of their own) and takes its chunks from them by `_gather`'s
  shuffles; an ungated STORE whose
  lanes fall into runs of neighbouring addresses in another order (a transposed tile) stores each run as vectors,
  the powers of two its length holds (14: 8 + 4 + 2), gathered by a tree of two-vector shuffles (`_gather`);
  other addresses are read or written lane by lane (a gather, a scatter);
- a REDUCE keeps one accumulator per chunk;
- an operand's lanes are taken from the chunks that hold them (the chunk itself, a GEP, or a VECTORIZE of
  single lanes).

`fuse_multiply_add` (run after the accumulators are made) turns `x * y + z` in floats into one fused
multiply-add (MULACC): the IR says where an FMA goes, the C compiler does not contract on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from zeptograd.dtype import DType, dtypes
from zeptograd.uop.ops import Ops, UOp
from zeptograd.uop.pattern import PatternMatcher, UPat
from zeptograd.uop.symbolic import split_const

MaxLanes = Callable[[Ops, DType], int]


def _width(total: int, limit: int) -> int:
    """The largest power of two that divides `total` and is at most `limit`."""
    w = 1
    while w * 2 <= limit and total % (w * 2) == 0:
        w *= 2
    return w


class _Devectorizer:
    def __init__(
        self,
        max_lanes: MaxLanes,
        masked_load: Callable[[DType], bool] | None = None,
        fragment_lanes: int = 1,
        paired_gated_stores: bool = False,
    ) -> None:
        self.max_lanes = max_lanes
        self.masked_load = masked_load
        self.fragment_lanes = fragment_lanes
        self.paired_gated_stores = paired_gated_stores
        self.chunks: dict[UOp, list[UOp]] = {}

    def get(self, u: UOp, start: int, n: int) -> UOp:
        """Lanes [start, start + n) of the devectorized `u`, as one node."""
        offset = 0
        for c in self.chunks[u]:
            count = c.dtype.count
            if offset == start and count == n:
                return c
            if offset <= start and start + n <= offset + count:
                if c.op is Ops.VECTORIZE:
                    # lanes of a vector built lane by lane: those lanes themselves (a gathered tile operand is
                    # broadcast from its loads, not put into a vector and taken out again)
                    parts = c.src[start - offset : start - offset + n]
                    return parts[0] if n == 1 else UOp(Ops.VECTORIZE, c.dtype.scalar().vec(n), parts)
                lanes = tuple(range(start - offset, start - offset + n))
                return UOp(Ops.GEP, c.dtype.scalar().vec(n), (c,), lanes)
            offset += count
        return UOp(Ops.VECTORIZE, u.dtype.scalar().vec(n), tuple(self.get(u, start + k, 1) for k in range(n)))

    def _locate(self, u: UOp, lane: int) -> tuple[UOp, int]:
        """The devectorized chunk of `u` that holds lane `lane`, and the lane's index in it."""
        offset = 0
        for c in self.chunks[u]:
            if lane < offset + c.dtype.count:
                return c, lane - offset
            offset += c.dtype.count
        raise IndexError(f"lane {lane} of a {u.dtype!r}")

    def _gather(self, lanes: list[tuple[UOp, int]]) -> UOp:
        """A vector of the given lanes (chunk, index). Lane k of n distinct vectors (a transposed tile: n a power of
        two, 2 <= n <= their width) is a tree of two-vector shuffles, shared by the n vectors a tile needs: log2(n)
        rounds of n shuffles (64 for 16 x 16) instead of a shuffle per lane; anything else, lane by lane."""
        n, (first, k) = len(lanes), lanes[0]
        sources = [c for c, _ in lanes]
        width = first.dtype.count
        if (
            2 <= n <= width
            and n & (n - 1) == 0
            and all(i == k and c.dtype == first.dtype for c, i in lanes)
            and len(set(sources)) == n
        ):
            # the tree pairs vector i with i + n/2, so its lanes come out in bit-reversed order: fed in that order,
            # they come out in order, and the run is the tree's vector as it is (no permute before the store)
            bits = n.bit_length() - 1
            reverse = [int(format(m, f"0{bits}b")[::-1], 2) for m in range(n)]
            picks = _transposed([sources[r] for r in reverse], k, 1)
            lanes_in_order = [picks[reverse[i]] for i in range(n)]
            return UOp(Ops.GEP, first.dtype.scalar().vec(n), (picks[0][0],), tuple(i for _, i in lanes_in_order))
        return UOp(Ops.VECTORIZE, first.dtype.scalar().vec(n), tuple(c.gep(i) for c, i in lanes))

    def lanes_for(self, u: UOp) -> int:
        limit = self.max_lanes(u.op, u.dtype.scalar())
        for s in u.src:
            if s.dtype.count > 1 or u.op in (Ops.CAST, Ops.BITCAST, Ops.WHERE):
                limit = min(limit, self.max_lanes(u.op, s.dtype.scalar()))
        return _width(u.dtype.count, limit)

    def visit(self, u: UOp) -> None:
        width = u.dtype.count
        if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and u.src[1].dtype.count > 1:
            self.chunks[u] = [self.store(u)]
            return
        if u.op is Ops.LOAD and width > 1 and u.src[0].op is Ops.INDEX:
            self.chunks[u] = self.load(u)
            return
        if u.op is Ops.WMMA:
            # a warp's fragments stay whole vectors, whatever else the target has
            a, b = u.src[:2]
            rest = tuple(self.get(s, 0, s.dtype.count) for s in u.src[2:])
            self.chunks[u] = [u.replace(src=(self.fragment(a), self.fragment(b), *rest))]
            return
        if u.op is Ops.REDUCE and u.src[0].op is Ops.WMMA:
            self.chunks[u] = [u.replace(src=(self.get(u.src[0], 0, width), *u.src[1:]))]
            return
        if u.op is Ops.INDEX and any(s.dtype.count > 1 for s in u.src[1:]):
            self.chunks[u] = [u]  # a vector of addresses: its LOAD or STORE reads the lanes itself
            return
        if width == 1 and u.op is not Ops.GEP:
            src = tuple(self.get(s, 0, 1) for s in u.src)
            self.chunks[u] = [u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)]
            return
        w = self.lanes_for(u)
        out = []
        for start in range(0, width, w):
            if u.op is Ops.VECTORIZE:
                parts = tuple(self.get(s, 0, 1) for s in u.src[start : start + w])
                out.append(parts[0] if w == 1 else UOp(Ops.VECTORIZE, u.dtype.scalar().vec(w), parts))
            elif u.op is Ops.GEP:
                out.append(self.gep(u, start, w))
            elif u.op is Ops.REDUCE:
                out.append(u.replace(src=(self.get(u.src[0], start, w), *u.src[1:]), dtype=u.dtype.scalar().vec(w)))
            else:
                src = tuple(self.get(s, start, w) if s.dtype.count > 1 else self.get(s, 0, 1) for s in u.src)
                out.append(u.replace(src=src, dtype=u.dtype.scalar().vec(w)))
        self.chunks[u] = out

    def fragment(self, v: UOp) -> UOp:
        """A WMMA operand: vector loads of `fragment_lanes` lanes (else of half as many, down to 4: the narrowest
        fragment vector a GPU renderer declares), where its lanes fall into runs of that many neighbouring elements
        of one buffer, ungated, each run starting at a multiple of its length, in whatever order the operand lists
        them (a GPU loads 16 bytes at once, aligned: a fragment-ordered copy, or a row-major operand whose k the
        tensor core renumbers); else its lanes as devectorized (a load each)."""
        n = v.dtype.count
        if n & (n - 1) == 0:
            addresses = self._fragment_addresses(v)
            w = min(n, self.fragment_lanes)
            while addresses is not None and w > 1:
                if (loads := self._fragment_runs(v, *addresses, w)) is not None:
                    return loads
                w = w // 2 if w > 4 else 1
        return self.get(v, 0, n)

    def _fragment_addresses(self, v: UOp) -> tuple[UOp, list[UOp], list[int]] | None:
        """The buffer all lanes of the WMMA operand `v` load from, each lane's address and its offset from lane 0's;
        None when a lane is no ungated load of that buffer or an offset is not a constant."""
        found = [_load_lane(v, k) for k in range(v.dtype.count)]
        lanes = [x for x in found if x is not None and len(x[0].src) == 1]
        if len(lanes) != len(found) or len({ld.src[0].src[0] for ld, _ in lanes}) != 1:
            return None
        picked = []
        for ld, k in lanes:
            addresses, gates = self._addresses(ld.src[0], ld.dtype.count)
            if gates is not None:
                return None
            picked.append(addresses[k])
        offsets = _offsets(picked)
        return None if offsets is None else (lanes[0][0].src[0].src[0], picked, offsets)

    def _fragment_runs(self, v: UOp, buf: UOp, addresses: list[UOp], offsets: list[int], w: int) -> UOp | None:
        """The lanes of `v` as loads of `w` neighbouring elements each (see `fragment`), or None."""
        by_offset = sorted(range(len(offsets)), key=lambda k: offsets[k])
        runs = [by_offset[i : i + w] for i in range(0, len(by_offset), w)]
        for run in runs:
            first = offsets[run[0]]
            if [offsets[k] - first for k in run] != list(range(w)) or not _divides(addresses[run[0]], w):
                return None
        ptr = self.get(buf, 0, 1)
        loads = [ptr.index(addresses[run[0]]).load(dtype=v.dtype.scalar().vec(w)) for run in runs]
        if len(loads) == 1 and runs[0] == list(range(w)):
            return loads[0]
        where = {k: (loads[r], i) for r, run in enumerate(runs) for i, k in enumerate(run)}
        # the lanes of the loads in the operand's order (kept whole: simplify's lane_loads is off for such a renderer)
        lanes = tuple(UOp(Ops.GEP, v.dtype.scalar(), (where[k][0],), (where[k][1],)) for k in range(len(offsets)))
        return UOp(Ops.VECTORIZE, v.dtype, lanes)

    def gep(self, u: UOp, start: int, w: int) -> UOp:
        lanes = u.arg[start : start + w]
        src = u.src[0]
        if list(lanes) == list(range(lanes[0], lanes[0] + w)):
            return self.get(src, lanes[0], w)
        if w > 1 and all(lane == lanes[0] for lane in lanes):
            return UOp(Ops.VECTORIZE, u.dtype.scalar().vec(w), (self.get(src, lanes[0], 1),) * w)
        return UOp(Ops.VECTORIZE, u.dtype.scalar().vec(w), tuple(self.get(src, lane, 1) for lane in lanes))

    def _addresses(self, index: UOp, width: int) -> tuple[list[UOp], list[UOp] | None]:
        def lanes(x: UOp) -> list[UOp]:
            if x.op is Ops.VECTORIZE and x.dtype.count == width:
                return list(x.src)
            if x.dtype.count == width:
                # a vector computed by other ops (two UNROLLs of one address): its lanes, as devectorized
                return [self.get(x, k, 1) for k in range(width)]
            return [x] * width

        gates = lanes(index.src[2]) if len(index.src) == 3 else None
        if gates is not None and all(g.op is Ops.CONST and g.arg is True for g in gates):
            gates = None  # a gate the value ranges decided: no gate
        return lanes(index.src[1]), gates

    def accesses(self, op: Ops, index: UOp, dt: DType, strided: bool = False) -> list[_Access]:
        """The chunks of a LOAD or STORE of `dt` through `index` (see `_Access`): a vector access where the lanes'
        addresses are one contiguous run in any order (ungated, or one gate for all of them), two vector loads for a
        LOAD of every other element when `strided` (ungated or with one gate), else one access per lane."""
        width = dt.count
        addresses, gates = self._addresses(index, width)
        # the pointer as devectorized: an AFTER (local memory read after a barrier) orders it after devectorized
        # stores, and the original would bring the vector code before them back into the kernel
        ptr = self.get(index.src[0], 0, 1)
        w = _width(width, self.max_lanes(op, dt.scalar()))
        out = []
        for start in range(0, width, w):
            addr = addresses[start : start + w]
            gate = None if gates is None else gates[start]
            uniform = gates is None or all(g is gate for g in gates[start : start + w])
            offsets = _offsets(addr) if w > 1 else None
            # a gate per lane: one masked load, which reads only the lanes whose gate is true (a gated-off lane's
            # address may be outside the buffer, a padded row's border: the load does not fault there)
            can_mask = self.masked_load
            masked = gates is not None and not uniform and op is Ops.LOAD
            masked = masked and can_mask is not None and can_mask(dt.scalar().vec(w))
            lane_gates = gates if gates is not None else []
            if offsets is not None and uniform and sorted(offsets) == list(range(min(offsets), min(offsets) + w)):
                low = min(offsets)
                lanes = None if offsets == list(range(w)) else tuple(o - low for o in offsets)
                out.append(_Access(start, w, "vector", [ptr.index(addr[0] + low if low else addr[0], gate)], lanes))
            elif masked and offsets == list(range(w)):
                out.append(_Access(start, w, "masked", [ptr.index(addr[0], self._mask(lane_gates, start, range(w)))]))
            elif strided and offsets == list(range(0, 2 * w, 2)) and (uniform or masked):
                # element e of the first load is lane e/2 (e even); of the second (at a + w - 1), lane (w-1+e)/2
                lo = (
                    gate
                    if uniform
                    else self._mask(lane_gates, start, [e // 2 if e % 2 == 0 else None for e in range(w)])
                )
                hi = (
                    gate
                    if uniform
                    else self._mask(lane_gates, start, [(w - 1 + e) // 2 if e % 2 else None for e in range(w)])
                )
                out.append(_Access(start, w, "strided", [ptr.index(addr[0], lo), ptr.index(addr[0] + (w - 1), hi)]))
            else:
                each = [ptr.index(addresses[k], None if gates is None else gates[k]) for k in range(start, start + w)]
                out.append(_Access(start, w, "lanes", each))
        return out

    @staticmethod
    def _mask(gates: list[UOp], start: int, lanes: Sequence[int | None]) -> UOp:
        """The vector of gates of a masked load: element e has lane lanes[e]'s gate (None: not read, false)."""
        false = UOp.const(dtypes.bool, False)
        return UOp(
            Ops.VECTORIZE, dtypes.bool.vec(len(lanes)), tuple(false if k is None else gates[start + k] for k in lanes)
        )

    def load(self, u: UOp) -> list[UOp]:
        out = []
        vec = u.dtype.scalar().vec
        # a gated read of every other element takes its lanes from two loads: one alternative value for all of them
        alt = u.src[1] if len(u.src) > 1 else None
        strided = alt is None or alt.dtype.count == 1 or (alt.op is Ops.VECTORIZE and len(set(alt.src)) == 1)
        accesses = self.accesses(Ops.LOAD, u.src[0], u.dtype, strided)
        if all(a.kind == "lanes" and a.width > 1 for a in accesses) and (chunks := self._transposed_load(u)):
            return chunks
        for a in accesses:
            start, w, targets = a.start, a.width, a.targets
            if a.kind != "lanes":
                alts = self._vector_alt(u, start, w) if len(targets[0].src) == 3 else ()
                if a.lanes is not None and alts:
                    # the alternative lanes, in the order the load reads them
                    alts = (UOp(Ops.GEP, vec(w), alts, tuple(a.lanes.index(k) for k in range(w))),)
                loads = [t.load(*alts, dtype=vec(w)) for t in targets]
            if a.kind in ("vector", "masked"):
                out.append(loads[0] if a.lanes is None else UOp(Ops.GEP, vec(w), (loads[0],), a.lanes))
                continue
            if a.kind == "strided":
                # every other element: lane k is element 2k of [a, a + 2w - 1): lanes 0, 2, .. of the load at a,
                # then lanes 1, 3, .. of the load at a + w - 1; taken as two half-vector GEPs, since a lane of a
                # vector load on its own becomes a scalar load (`lane_loads`)
                evens = UOp(Ops.GEP, vec(w // 2), (loads[0],), tuple(range(0, w, 2)))
                odds = UOp(Ops.GEP, vec(w // 2), (loads[1],), tuple(range(1, w, 2)))
                picks = [evens.gep(k) for k in range(w // 2)] + [odds.gep(k) for k in range(w // 2)]
                out.append(UOp(Ops.VECTORIZE, vec(w), tuple(picks)))
                continue
            scalars = []
            for k, target in enumerate(targets, start):
                alt1 = () if len(target.src) == 2 else (self.get(u.src[1], k if u.src[1].dtype.count > 1 else 0, 1),)
                scalars.append(target.load(*alt1))
            out.append(scalars[0] if w == 1 else UOp(Ops.VECTORIZE, vec(w), tuple(scalars)))
        return out

    def _transposed_load(self, u: UOp) -> list[UOp] | None:
        """The chunks of a LOAD whose chunks gather, when its lanes fall into runs of contiguous addresses in another
        order, each as wide as a chunk (a transposing copy's tile: each chunk takes one lane of every run): a
        vector load a run (masked, where its lanes have gates of their own) and the chunks taken from them by the
        tree of two-vector shuffles of `_gather` (an 8 x 8 tile: 8 loads and 24 shuffles for 64 scalar loads).
        None where it does not fit."""
        index, width = u.src[0], u.dtype.count
        runs = self._runs(Ops.LOAD, index, u.dtype)
        w = _width(width, self.max_lanes(Ops.LOAD, u.dtype.scalar()))
        if runs is not None and 2 <= len(runs[0]) < w:
            w = len(runs[0])  # runs shorter than a vector (a tile 4 values deep): chunks of a run's length
        if runs is None or any(len(run) != w for run in runs):
            return None
        run_of = {k: (r, i) for r, run in enumerate(runs) for i, k in enumerate(run)}
        for start in range(0, width, w):
            # the shuffle tree's case: lane j of the chunk is lane i (one for all) of w different runs
            picks = [run_of[k] for k in range(start, start + w)]
            if len({r for r, _ in picks}) != w or len({i for _, i in picks}) != 1:
                return None
        addresses, gates = self._addresses(index, width)
        ptr, vec = self.get(index.src[0], 0, 1), u.dtype.scalar().vec(w)
        loads = []
        for run in runs:
            gate: UOp | None = None
            if gates is not None:
                gate = gates[run[0]]
                if any(gates[k] is not gate for k in run):
                    if self.masked_load is None or not self.masked_load(vec):
                        return None
                    gate = self._mask(gates, 0, run)
            alt: tuple[UOp, ...] = ()
            if gate is not None and len(u.src) > 1:
                alt_lanes = [self.get(u.src[1], k if u.src[1].dtype.count > 1 else 0, 1) for k in run]
                same = len(set(alt_lanes)) == 1
                alt = (_broadcast(alt_lanes[0], w) if same else UOp(Ops.VECTORIZE, vec, tuple(alt_lanes)),)
            loads.append(ptr.index(addresses[run[0]], gate).load(*alt, dtype=vec))
        return [
            self._gather([(loads[run_of[k][0]], run_of[k][1]) for k in range(start, start + w)])
            for start in range(0, width, w)
        ]

    def _vector_alt(self, u: UOp, start: int, w: int) -> tuple[UOp, ...]:
        """The alternative value of a gated vector LOAD `u`'s lanes [start, start + w), as a vector (none if
        ungated)."""
        if len(u.src) == 1:
            return ()
        alt = u.src[1]
        return (self.get(alt, start, w) if alt.dtype.count > 1 else _broadcast(self.get(alt, 0, 1), w),)

    def _runs(self, op: Ops, index: UOp, dt: DType) -> list[list[int]] | None:
        """The lanes of a STORE (ungated) or LOAD of `dt` through `index` grouped into runs of contiguous addresses
        (a transposed tile: lanes of the value's vectors go to the other axis's runs): each stretch of neighbouring
        addresses cut into vectors of the target, then the powers of two its rest holds (a convolution's rows of
        14 outputs: 8 + 4 + 2); None where no two lanes are neighbours, or the addresses are not one expression
        plus constants."""
        width = dt.count
        addresses, gates = self._addresses(index, width)
        w = _width(width, self.max_lanes(op, dt.scalar()))
        gated_store = op is Ops.STORE and gates is not None
        offsets = _offsets(addresses) if w > 1 and (self.paired_gated_stores or not gated_store) else None
        if offsets is None or len(set(offsets)) != width:
            return None
        order = sorted(range(width), key=lambda k: offsets[k])
        stretches = [[order[0]]]
        for k in order[1:]:
            prev = stretches[-1][-1]
            # a gated STORE's run is one gated store: its lanes share their gate
            same_gate = op is Ops.LOAD or gates is None or gates[k] is gates[prev]
            if offsets[k] == offsets[prev] + 1 and same_gate:
                stretches[-1].append(k)
            else:
                stretches.append([k])
        if all(len(s) == 1 for s in stretches):
            return None
        # a gated STORE's runs are pairs at most, each one two-vector shuffle: its stores come after the whole tile
        # (the IF blocks last), and the shuffle trees of longer runs kept so many vectors live there that gcc
        # spilled accumulators in the loop (a padded 6 x 16 tile's stores ran at two-thirds of the speed)
        longest = 2 if gated_store else w
        runs = []
        for stretch in stretches:
            while stretch:
                n = min(1 << (len(stretch).bit_length() - 1), longest)  # the largest power of two that fits
                runs.append(stretch[:n])
                stretch = stretch[n:]
        return runs

    def store(self, u: UOp) -> UOp:
        index, value = u.src
        stores = []
        accesses = self.accesses(Ops.STORE, index, value.dtype)
        gathers = any(a.kind == "lanes" and a.width > 1 for a in accesses)
        if gathers and (runs := self._runs(Ops.STORE, index, value.dtype)):
            addresses, gates = self._addresses(index, value.dtype.count)
            ptr = self.get(index.src[0], 0, 1)
            # the runs that take lanes of the same vectors one after another, not in address order: the shuffles
            # that gather a run then serve the next ones at once (a convolution's 6 x 2-vector tile, stored as 48
            # pairs of neighbouring outputs: in address order its 12 interleaved vectors all lived at once, and gcc
            # spilled accumulators in the loop before it)
            if self.paired_gated_stores:
                # each lane of the value as (its vector's position, its index in that vector)
                where = [(i, j) for i, c in enumerate(self.chunks[value]) for j in range(c.dtype.count)]
                runs.sort(key=lambda run: (sorted(where[k][0] for k in run), where[run[0]][1]))
            for run in runs:
                target = ptr.index(addresses[run[0]], None if gates is None else gates[run[0]])
                if len(run) == 1:
                    stores.append(target.store(self.get(value, run[0], 1)))
                    continue
                stores.append(target.store(self._gather([self._locate(value, k) for k in run])))
            return stores[0] if len(stores) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(stores))
        for a in accesses:
            start, w, targets = a.start, a.width, a.targets
            if a.kind == "vector":
                chunk = self.get(value, start, w)
                if a.lanes is not None:
                    # element k of the run is lane a.lanes.index(k) of the value
                    chunk = UOp(Ops.GEP, chunk.dtype, (chunk,), tuple(a.lanes.index(k) for k in range(w)))
                stores.append(targets[0].store(chunk))
            else:
                stores.extend(target.store(self.get(value, k, 1)) for k, target in enumerate(targets, start))
        return stores[0] if len(stores) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(stores))


def _transposed(vectors: list[UOp], k: int, group: int) -> list[tuple[UOp, int]]:
    """Group k (`group` lanes from lane k * group) of each of `vectors` (n of them, all of one width), in order, as
    lanes (vector, index) of one vector: pair vector i with vector i + n/2, interleaving their groups of the half
    that holds group k, so n/2 vectors of groups twice as long hold it; the same pairs serve every k of that half.
    Each half is taken first as a GEP of its own: a lane of a vector LOAD alone would become a scalar load."""
    n, width = len(vectors), vectors[0].dtype.count
    if n == 1:
        return [(vectors[0], k * group + e) for e in range(group)]
    per_half = width // (2 * group)  # groups in half a vector
    h, k2 = divmod(k, per_half)
    half = vectors[0].dtype.scalar().vec(width // 2)
    lanes_of_half = tuple(range(h * width // 2, (h + 1) * width // 2))
    pairs = []
    for i in range(n // 2):
        a, b = (UOp(Ops.GEP, half, (v,), lanes_of_half) for v in (vectors[i], vectors[i + n // 2]))
        lanes = [x.gep(m * group + e) for m in range(per_half) for x in (a, b) for e in range(group)]
        pairs.append(UOp(Ops.VECTORIZE, vectors[0].dtype, tuple(lanes)))
    inner = _transposed(pairs, k2, 2 * group)  # group k2 of pair i: group k of vector i, then of vector i + n/2
    out: list[tuple[UOp, int]] = [inner[0]] * (n * group)
    for i in range(n // 2):
        for e in range(group):
            out[i * group + e] = inner[2 * i * group + e]
            out[(i + n // 2) * group + e] = inner[(2 * i + 1) * group + e]
    return out


@dataclass(frozen=True)
class _Access:
    """One chunk of a LOAD or STORE: lanes [start, start + width) through `targets` (INDEXes). A "vector" access has
    one, the start of a contiguous run, whose element `lanes[j]` is lane j (`lanes` None: element j); a "masked"
    read one, gated lane by lane (a vector of gates); a "strided" read has the two vector loads that cover it;
    "lanes" has one per lane."""

    start: int
    width: int
    kind: str  # "vector", "masked", "strided" or "lanes"
    targets: list[UOp]
    lanes: tuple[int, ...] | None = None


def _offsets(addresses: list[UOp]) -> list[int] | None:
    """Each address minus the first, when all the differences are constants."""
    split = [split_const(a) for a in addresses]
    if all(rest is split[0][0] for rest, _ in split):
        # every lane is one expression plus a constant of its own (the common case): no simplify per lane (a
        # matmul's 8 x 32 tile took 0.3 s of codegen in them)
        return [c - split[0][1] for _, c in split]
    out = [0]
    for a in addresses[1:]:
        diff = (a - addresses[0]).simplify()
        if diff.op is not Ops.CONST:
            return None
        out.append(diff.arg)
    return out


def _load_lane(v: UOp, k: int) -> tuple[UOp, int] | None:
    """Lane k of `v` (as `expand` made it: VECTORIZEs and GEPs of LOADs) as (the LOAD, its lane); None when it is
    not a lane of a LOAD."""
    while v.op in (Ops.VECTORIZE, Ops.GEP):
        v, k = (v.src[k], 0) if v.op is Ops.VECTORIZE else (v.src[0], v.arg[k])
    return (v, k) if v.op is Ops.LOAD and v.src[0].op is Ops.INDEX else None


def _divides(x: UOp, n: int) -> bool:
    """Is every value of the index expression `x` a multiple of n? (A sufficient test: constants, sums of
    multiples, products with a multiple.)"""
    if x.op is Ops.CONST:
        return x.arg % n == 0
    if x.op is Ops.ADD:
        return all(_divides(s, n) for s in x.src)
    if x.op is Ops.MUL:
        return any(_divides(s, n) for s in x.src)
    return False


def _broadcast(x: UOp, width: int) -> UOp:
    return UOp(Ops.VECTORIZE, x.dtype.vec(width), (x,) * width)


def devectorize(
    sink: UOp,
    max_lanes: MaxLanes,
    masked_load: Callable[[DType], bool] | None = None,
    fragment_lanes: int = 1,
    paired_gated_stores: bool = False,
) -> UOp:
    """`sink` with every vector at most as wide as `max_lanes` allows (see the module docstring); `masked_load(dt)`:
    whether the target reads a vector `dt` under a gate per lane (None: it does not); `fragment_lanes`: the most
    lanes of a WMMA operand the target loads at once (`fragment`); `paired_gated_stores`: whether a gated STORE's
    neighbouring lanes become gated two-lane stores, and a STORE's runs go in the order of their vectors (`store`)."""
    if not any(u.dtype.count > 1 for u in sink.toposort()):
        return sink
    dv = _Devectorizer(max_lanes, masked_load, fragment_lanes, paired_gated_stores)
    for u in sink.toposort():
        dv.visit(u)
    return dv.chunks[sink][0]


def _fma(m: UOp, c: UOp) -> UOp | None:
    # float16 and bfloat16 round the product first, as numpy does: a float16 tensor rounds every op (the C device
    # fused them on a CPU without FP16 arithmetic, an AMD Zen 4, where gcc computes _Float16 in float)
    if not dtypes.is_float(m.dtype.scalar()) or m.dtype.scalar().itemsize < 4:
        return None
    return UOp(Ops.MULACC, m.dtype, (m.src[0], m.src[1], c))


# x * y + z -> MULACC(x, y, z): one rounding instead of two, one instruction
fuse_multiply_add = PatternMatcher(
    [(UPat(Ops.ADD, src=[UPat(Ops.MUL, name="m"), UPat.var("c")]), _fma, "x * y + z -> MULACC(x, y, z)")]
)
