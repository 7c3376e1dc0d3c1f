"""The stage specs, and the unified STORE rule every stage shares."""

from __future__ import annotations

import pytest

from zeptograd.dtype import AddrSpace, dtypes
from zeptograd.uop import Ops, UOp
from zeptograd.uop.spec import SpecError, kernel_spec, program_spec, tensor_spec, verify

F32 = dtypes.float32


def i(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def glob(n: int = 0, dtype=F32, size: int = 16) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtype.ptr(size), (), n)


def elementwise_kernel() -> UOp:
    """out[r] = a[r] * 2 + 1 for r in range(16), as a kernel AST."""
    out, a = glob(0), glob(1)
    r = UOp.range(16, 0)
    value = a.index(r).load() * 2.0 + 1.0
    return UOp(Ops.END, dtypes.void, (out.index(r).store(value), r)).sink()


def reduce_kernel() -> UOp:
    out, a = glob(0, size=1), glob(1)
    r = UOp.range(16, 0)
    total = UOp(Ops.REDUCE, F32, (a.index(r).load(), r), Ops.ADD)
    return out.index(i(0)).store(total).sink()


def test_valid_kernels_pass():
    verify(elementwise_kernel(), kernel_spec, "kernel AST")
    verify(reduce_kernel(), kernel_spec, "kernel AST")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_unified_store_memory_write_is_void():
    write = glob().index(i(3)).store(UOp.const(F32, 1.0))
    verify(write, kernel_spec, "kernel AST")
    bad = UOp(Ops.STORE, F32.ptr(16), (glob().index(i(3)), UOp.const(F32, 1.0)))
    with pytest.raises(SpecError, match="STORE through an INDEX writes memory and has dtype void"):
        verify(bad, kernel_spec, "kernel AST")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
@pytest.mark.parametrize("op", [Ops.DEFINE_GLOBAL, Ops.DEFINE_REG, Ops.DEFINE_VAR, Ops.BUFFER])
def test_unified_store_assignment_has_the_target_dtype(op: Ops):
    if op is Ops.DEFINE_VAR:
        target = UOp(op, dtypes.int32, (), ("n", 0, 10))
        value = UOp.const(dtypes.int32, 3)
    elif op is Ops.BUFFER:
        target = UOp(op, F32, (), (0, "CPU", 16))
        value = UOp.const(F32, 3.0)
    else:
        space = AddrSpace.GLOBAL if op is Ops.DEFINE_GLOBAL else AddrSpace.REG
        target = UOp(op, F32.ptr(1, space), (), 0)
        value = UOp.const(F32, 3.0)
    st = target.store(value)
    assert st.dtype is target.dtype
    spec = tensor_spec if op is Ops.BUFFER else kernel_spec
    verify(st, spec, "stage")
    wrong = UOp(Ops.STORE, dtypes.void, (target, value))
    with pytest.raises(SpecError, match=f"a STORE that assigns a {op.name} has the target's dtype"):
        verify(wrong, spec, "stage")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_unified_store_rejects_other_targets_and_says_why():
    c = UOp.const(F32, 1.0)
    bad = UOp(Ops.STORE, F32, (c, c))
    for spec in (tensor_spec, kernel_spec, program_spec):
        with pytest.raises(SpecError, match="a STORE target must be an INDEX .* not a CONST"):
            verify(bad, spec, "stage")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_store_value_dtype_must_fit_the_target():
    with pytest.raises(SpecError, match="STORE of a dtypes.int32 value through a pointer to dtypes.float32"):
        verify(glob().index(i(0)).store(UOp.const(dtypes.int32, 1)), kernel_spec, "kernel AST")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_alu_dtype_rules():
    a = glob(1).index(i(0)).load()
    mixed = UOp(Ops.ADD, F32, (a, UOp.const(dtypes.int32, 1)))
    with pytest.raises(SpecError, match="ADD of mixed dtypes"):
        verify(glob().index(i(0)).store(mixed), kernel_spec, "kernel AST")
    cmp = UOp(Ops.CMPLT, F32, (a, a))
    with pytest.raises(SpecError, match="CMPLT gives bool"):
        verify(cmp, kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="IDIV is defined on integers"):
        verify(UOp(Ops.IDIV, F32, (a, a)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="EXP2 is defined on floats"):
        verify(UOp(Ops.EXP2, dtypes.int32, (UOp.const(dtypes.int32, 1),)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="WHERE's condition must be bool"):
        verify(UOp(Ops.WHERE, F32, (a, a, a)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="CONST of dtypes.float32 holds a int"):
        verify(UOp(Ops.CONST, F32, (), 1), kernel_spec, "kernel AST")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_gated_load_carries_its_fallback():
    gate = UOp.range(16, 0) < 8
    gated = glob(1).index(UOp.range(16, 0), gate)
    verify(gated.load(UOp.const(F32, 0.0)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="a gated LOAD carries its fallback"):
        verify(gated.load(), kernel_spec, "kernel AST")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_linear_program_rules():
    r = UOp.range(16, 0)
    gate = r < 8
    gated_store = glob().index(r, gate).store(UOp.const(F32, 1.0))
    verify(gated_store, kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="gated STORE must be lowered to IF/STORE/ENDIF"):
        verify(gated_store, program_spec, "linear program")
    if_ = UOp(Ops.IF, dtypes.void, (gate,))
    store = glob().index(r).store(UOp.const(F32, 1.0))
    lowered = [glob(), i(16), r, i(8), gate, if_, glob().index(r), store, UOp(Ops.ENDIF, dtypes.void, (if_, store))]
    verify(lowered, program_spec, "linear program")
    with pytest.raises(SpecError, match="REDUCE is lowered to a DEFINE_REG accumulator"):
        verify(reduce_kernel(), program_spec, "linear program")
    acc = UOp(Ops.DEFINE_REG, F32.ptr(1, AddrSpace.REG), (), 0)
    verify(acc.index(i(0)).store(UOp.const(F32, 0.0)), program_spec, "linear program")
    verify(acc.after(r).index(i(0)).load(), program_spec, "linear program")


@pytest.mark.no_spec  # builds illegal nodes to check the spec's errors
def test_stage_vocabulary():
    with pytest.raises(SpecError, match="RESHAPE is not legal in the kernel AST"):
        verify(UOp(Ops.RESHAPE, F32, (UOp.const(F32, 1.0),), (1,)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="DEFINE_GLOBAL is not legal in the tensor graph"):
        verify(glob().index(i(0)), tensor_spec, "tensor graph")
    buf = UOp(Ops.BUFFER, F32, (), (0, "CPU", 6))
    view = UOp(Ops.RESHAPE, F32, (buf,), (2, 3))
    total = UOp(Ops.REDUCE_AXIS, F32, (view,), (Ops.ADD, (1,)))
    verify(UOp(Ops.CONTIGUOUS, F32, (total,)).sink(), tensor_spec, "tensor graph")
    with pytest.raises(SpecError, match="REDUCE_AXIS's arg is"):
        verify(UOp(Ops.REDUCE_AXIS, F32, (view,), (Ops.SUB, (1,))), tensor_spec, "tensor graph")
    with pytest.raises(SpecError, match="DEFINE_GLOBAL is a pointer in the GLOBAL address space"):
        verify(UOp(Ops.DEFINE_GLOBAL, F32, (), 0), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="VECTORIZE of 2 gives"):
        verify(UOp(Ops.VECTORIZE, F32.vec(4), (UOp.const(F32, 1.0), UOp.const(F32, 2.0))), kernel_spec, "k")
    v = UOp(Ops.VECTORIZE, F32.vec(2), (UOp.const(F32, 1.0), UOp.const(F32, 2.0)))
    verify(UOp(Ops.GEP, F32, (v,), (1,)), kernel_spec, "kernel AST")
    with pytest.raises(SpecError, match="GEP lanes"):
        verify(UOp(Ops.GEP, F32, (v,), (2,)), kernel_spec, "kernel AST")
