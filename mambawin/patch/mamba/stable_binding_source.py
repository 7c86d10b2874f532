"""The text of mambawin's selective_scan.cpp for a stable-ABI build (patch stable-binding).

Written for mambawin from the two functions' signatures and the SSMParamsBase/SSMParamsBwd fields
in upstream's selective_scan.h; upstream's binding text is not reused. The schemas are the single
source of truth for the ops' signatures: the binding registers them and the shim's fakes follow
them (tests/test_patches_stable_mamba.py checks both against each other).
"""

from __future__ import annotations

from mambawin.abi import stable_library

EXTENSION = "selective_scan_cuda"  # upstream's module name, the ops' namespace (mambawin.abi)
LIBRARY = stable_library(EXTENSION)
# Upstream's fwd returns [out, x] (+ out_z with z): a list whose length depends on z only.
FWD_SCHEMA = (
    "fwd(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
    "Tensor? delta_bias, bool delta_softplus) -> Tensor[]"
)
# bwd writes into a caller's dz (mamba_inner_fn passes a slice of its dxz buffer), so dz is
# `(a!)`. torch.compile functionalizes a mutating op only when it returns plain Tensors (no list,
# no optional), so bwd returns nine: du, ddelta, dA, dB, dC, dD, ddelta_bias, dz, out_z, where an
# output the call does not produce (no D, no delta_bias, the caller's own dz, no recompute_out_z)
# is a 0-element tensor. None aliases an input. The shim rebuilds upstream's list from them.
BWD_SCHEMA = (
    "bwd(Tensor u, Tensor delta, Tensor A, Tensor B, Tensor C, Tensor? D, Tensor? z, "
    "Tensor? delta_bias, Tensor dout, Tensor? x, Tensor? out, Tensor(a!)? dz, "
    "bool delta_softplus, bool recompute_out_z) -> "
    "(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
MARK = "// mambawin stable-binding:"
# What a complex A gets, from the binding and, first, from the shim (stable_shim.py says why).
NO_COMPLEX = (
    "complex weights (A) are not supported by this build: its kernels are float-only "
    "(mambawin patches complex-removal and stable-binding; --keep-complex needs --abi torch)"
)
SOURCE = (
    (
        r"""// selective_scan.cpp for torch's stable C ABI.
"""
        + MARK
        + r""" written by mambawin in place of upstream's extension-module binding.
//
// The library this file ends up in registers two torch ops, selective_scan_cuda::fwd and ::bwd,
// and reaches torch only through its stable C shims (torch/csrc/stable, torch/headeronly), so it
// loads in every torch from the build's TORCH_TARGET_VERSION on and in any Python: it uses no
// CPython and no libtorch C++ API. The Python module selective_scan_cuda (selective_scan_cuda.py,
// patch stable-shim) loads it and keeps upstream's fwd(...)/bwd(...) functions.
// Float weights only: the complex<float> kernels are not built (patch complex-removal).

#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>  // aoti_torch_get_current_cuda_stream (USE_CUDA)
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/shim_utils.h>  // TORCH_ERROR_CODE_CHECK (2.10's name)

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "selective_scan.h"

// Defined in the selective_scan_{fwd,bwd}_*.cu units, one instantiation per dtype pair.
template <typename input_t, typename weight_t>
void selective_scan_fwd_cuda(SSMParamsBase &params, cudaStream_t stream);

template <typename input_t, typename weight_t>
void selective_scan_bwd_cuda(SSMParamsBwd &params, cudaStream_t stream);

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptionalTensor = std::optional<Tensor>;
using index_t = SSMParamsBase::index_t;

constexpr int64_t kChunk = 2048;      // sequence positions per saved scan state (x's n_chunks)
constexpr int64_t kMaxDstate = 256;   // the kernels' shared-memory bound (MAX_DSTATE)

#define MAMBAWIN_NO_COMPLEX "@NO_COMPLEX@"

// The name complex-removal looks for: it finds the binding already float-only.
#define DISPATCH_WTYPE_FLOAT_ONLY(WTYPE, NAME, ...)                                             \
    if ((WTYPE) == ScalarType::Float) {                                                         \
        using weight_t = float;                                                                 \
        __VA_ARGS__();                                                                          \
    } else {                                                                                    \
        STD_TORCH_CHECK(false, NAME, ": ", MAMBAWIN_NO_COMPLEX);                                \
    }

#define MAMBAWIN_DISPATCH_INPUT(ITYPE, NAME, ...)                                               \
    if ((ITYPE) == ScalarType::Float) {                                                         \
        using input_t = float;                                                                  \
        __VA_ARGS__();                                                                          \
    } else if ((ITYPE) == ScalarType::Half) {                                                   \
        using input_t = torch::headeronly::Half;                                                \
        __VA_ARGS__();                                                                          \
    } else if ((ITYPE) == ScalarType::BFloat16) {                                               \
        using input_t = torch::headeronly::BFloat16;                                            \
        __VA_ARGS__();                                                                          \
    } else {                                                                                    \
        STD_TORCH_CHECK(false, NAME, ": input dtype ", torch::headeronly::toString(ITYPE),      \
                        " is not supported (float32, float16, bfloat16)");                      \
    }

std::string shape_text(torch::headeronly::IntHeaderOnlyArrayRef shape) {
    std::ostringstream text;
    text << "(";
    for (size_t i = 0; i < shape.size(); ++i) {
        text << (i ? ", " : "") << shape[i];
    }
    text << ")";
    return text.str();
}

void check_shape(const Tensor &t, const char *name, std::initializer_list<int64_t> shape) {
    bool same = t.dim() == static_cast<int64_t>(shape.size());
    int64_t axis = 0;
    for (int64_t want : shape) {
        same = same && t.size(axis++) == want;
    }
    STD_TORCH_CHECK(same, "selective_scan: ", name, " must have shape ",
                    shape_text(torch::headeronly::IntHeaderOnlyArrayRef(shape)), ", got ",
                    shape_text(t.sizes()));
}

void check_cuda(const Tensor &t, const char *name) {
    STD_TORCH_CHECK(t.is_cuda(), "selective_scan: ", name, " must be a CUDA tensor");
}

// The kernels read the last dimension with unit stride; a length-1 one may have any stride.
void check_unit_stride(const Tensor &t, const char *name) {
    STD_TORCH_CHECK(t.stride(-1) == 1 || t.size(-1) == 1, "selective_scan: ", name,
                    " must be contiguous in its last dimension");
}

void check_dtype(const Tensor &t, const char *name, ScalarType want) {
    STD_TORCH_CHECK(t.scalar_type() == want, "selective_scan: ", name, " must be ",
                    torch::headeronly::toString(want), ", got ",
                    torch::headeronly::toString(t.scalar_type()));
}

// What every (batch, dim, seqlen) operand must be: u's dtype, on CUDA, unit last stride.
void check_sequence(const Tensor &t, const char *name, ScalarType dtype,
                    std::initializer_list<int64_t> shape) {
    check_dtype(t, name, dtype);
    check_cuda(t, name);
    check_unit_stride(t, name);
    check_shape(t, name, shape);
}

// D and delta_bias: float32 vectors of length dim.
void check_channel_vector(const OptionalTensor &t, const char *name, int64_t dim) {
    if (t.has_value()) {
        check_dtype(*t, name, ScalarType::Float);
        check_cuda(*t, name);
        check_unit_stride(*t, name);
        check_shape(*t, name, {dim});
    }
}

// The problem's sizes, read from u, A and B once both are known to have the right rank.
struct Sizes {
    int64_t batch, dim, seqlen, dstate, n_groups, n_chunks;
    bool variable_B, variable_C;
};

Sizes read_sizes(const Tensor &u, const Tensor &A, const Tensor &B, const Tensor &C) {
    STD_TORCH_CHECK(u.dim() == 3, "selective_scan: u must be (batch, dim, seqlen), got ",
                    shape_text(u.sizes()));
    STD_TORCH_CHECK(A.dim() == 2, "selective_scan: A must be (dim, dstate), got ",
                    shape_text(A.sizes()));
    Sizes s{};
    s.batch = u.size(0);
    s.dim = u.size(1);
    s.seqlen = u.size(2);
    s.dstate = A.size(1);
    // B and C vary along the sequence when they carry batch and groups: (batch, groups, dstate, L).
    s.variable_B = B.dim() >= 3;
    s.variable_C = C.dim() >= 3;
    s.n_groups = s.variable_B ? B.size(1) : 1;
    s.n_chunks = (s.seqlen + kChunk - 1) / kChunk;
    STD_TORCH_CHECK(s.dstate <= kMaxDstate, "selective_scan: state dimension ", s.dstate,
                    " is over the supported ", kMaxDstate);
    return s;
}

void check_types(ScalarType input, ScalarType weight, const char *op) {
    STD_TORCH_CHECK(input == ScalarType::Float || input == ScalarType::Half ||
                        input == ScalarType::BFloat16,
                    op, ": u must be float32, float16 or bfloat16, got ",
                    torch::headeronly::toString(input));
    STD_TORCH_CHECK(weight == ScalarType::Float, op, ": ", MAMBAWIN_NO_COMPLEX);
}

// B or C: (dim, dstate) with A's dtype, or (batch, groups, dstate, seqlen) with u's.
void check_state_operand(const Tensor &t, const char *name, bool variable, const Sizes &s,
                         ScalarType input, ScalarType weight) {
    check_dtype(t, name, variable ? input : weight);
    check_cuda(t, name);
    if (variable) {
        check_shape(t, name, {s.batch, s.n_groups, s.dstate, s.seqlen});
        check_unit_stride(t, name);
    } else {
        check_shape(t, name, {s.dim, s.dstate});
    }
}

void check_operands(const Tensor &u, const Tensor &delta, const Tensor &A, const Tensor &B,
                    const Tensor &C, const OptionalTensor &D, const OptionalTensor &delta_bias,
                    const Sizes &s) {
    const ScalarType input = u.scalar_type();
    const ScalarType weight = A.scalar_type();
    check_sequence(u, "u", input, {s.batch, s.dim, s.seqlen});
    check_sequence(delta, "delta", input, {s.batch, s.dim, s.seqlen});
    check_cuda(A, "A");
    check_state_operand(B, "B", s.variable_B, s, input, weight);
    check_state_operand(C, "C", s.variable_C, s, input, weight);
    check_channel_vector(D, "D", s.dim);
    check_channel_vector(delta_bias, "delta_bias", s.dim);
}

index_t stride(const Tensor &t, int64_t axis) { return static_cast<index_t>(t.stride(axis)); }

// Strides (in elements) of B, C or their gradients: a time-invariant (dim, dstate) operand has a
// d stride, a time-variant (batch, groups, dstate, seqlen) one batch and group strides instead.
struct StateStrides {
    index_t batch = 0, group = 0, d = 0, dstate = 0;
};

StateStrides state_strides(const Tensor &t, bool variable) {
    StateStrides out;
    if (variable) {
        out.batch = stride(t, 0);
        out.group = stride(t, 1);
        out.dstate = stride(t, 2);
    } else {
        out.d = stride(t, 0);
        out.dstate = stride(t, 1);
    }
    return out;
}

void *data_or_null(const OptionalTensor &t) { return t.has_value() ? t->data_ptr() : nullptr; }

// Sizes, flags and the operands both directions read: u, delta, A, B, C, D, delta_bias.
void fill_inputs(SSMParamsBase &p, const Sizes &s, const Tensor &u, const Tensor &delta,
                 const Tensor &A, const Tensor &B, const Tensor &C, const OptionalTensor &D,
                 const OptionalTensor &delta_bias, bool delta_softplus) {
    std::memset(&p, 0, sizeof(p));
    p.batch = static_cast<int>(s.batch);
    p.dim = static_cast<int>(s.dim);
    p.seqlen = static_cast<int>(s.seqlen);
    p.dstate = static_cast<int>(s.dstate);
    p.n_groups = static_cast<int>(s.n_groups);
    p.n_chunks = static_cast<int>(s.n_chunks);
    p.dim_ngroups_ratio = static_cast<int>(s.dim / s.n_groups);
    p.is_variable_B = s.variable_B;
    p.is_variable_C = s.variable_C;
    p.delta_softplus = delta_softplus;

    p.u_ptr = u.data_ptr();
    p.u_batch_stride = stride(u, 0);
    p.u_d_stride = stride(u, 1);
    p.delta_ptr = delta.data_ptr();
    p.delta_batch_stride = stride(delta, 0);
    p.delta_d_stride = stride(delta, 1);
    p.A_ptr = A.data_ptr();
    p.A_d_stride = stride(A, 0);
    p.A_dstate_stride = stride(A, 1);
    const StateStrides b = state_strides(B, s.variable_B);
    p.B_ptr = B.data_ptr();
    p.B_batch_stride = b.batch;
    p.B_group_stride = b.group;
    p.B_d_stride = b.d;
    p.B_dstate_stride = b.dstate;
    const StateStrides c = state_strides(C, s.variable_C);
    p.C_ptr = C.data_ptr();
    p.C_batch_stride = c.batch;
    p.C_group_stride = c.group;
    p.C_d_stride = c.d;
    p.C_dstate_stride = c.dstate;
    p.D_ptr = data_or_null(D);
    p.delta_bias_ptr = data_or_null(delta_bias);
}

void fill_out(SSMParamsBase &p, const Tensor &out) {
    p.out_ptr = out.data_ptr();
    p.out_batch_stride = stride(out, 0);
    p.out_d_stride = stride(out, 1);
}

// The gate z and the gated output out_z (only with z).
void fill_gate(SSMParamsBase &p, const Tensor &z, const Tensor &out_z) {
    p.z_ptr = z.data_ptr();
    p.z_batch_stride = stride(z, 0);
    p.z_d_stride = stride(z, 1);
    p.out_z_ptr = out_z.data_ptr();
    p.out_z_batch_stride = stride(out_z, 0);
    p.out_z_d_stride = stride(out_z, 1);
}

cudaStream_t current_stream(const Tensor &t) {
    void *stream = nullptr;
    TORCH_ERROR_CODE_CHECK(
        aoti_torch_get_current_cuda_stream(t.get_device_index(), &stream));
    return static_cast<cudaStream_t>(stream);
}

// zeros with t's sizes, strides and dtype.
Tensor zeros_like(const Tensor &t) {
    Tensor out = torch::stable::empty_like(t);
    torch::stable::zero_(out);
    return out;
}

std::vector<Tensor> selective_scan_fwd(const Tensor &u, const Tensor &delta, const Tensor &A,
                                       const Tensor &B, const Tensor &C, const OptionalTensor &D,
                                       const OptionalTensor &z, const OptionalTensor &delta_bias,
                                       bool delta_softplus) {
    check_types(u.scalar_type(), A.scalar_type(), "selective_scan_fwd");
    const Sizes s = read_sizes(u, A, B, C);
    check_operands(u, delta, A, B, C, D, delta_bias, s);

    // out takes delta's layout (upstream's choice); x keeps each chunk's last scan state.
    Tensor out = torch::stable::empty_like(delta);
    Tensor x = torch::stable::new_empty(u, {s.batch, s.dim, s.n_chunks, 2 * s.dstate},
                                        A.scalar_type());
    SSMParamsBase params;
    fill_inputs(params, s, u, delta, A, B, C, D, delta_bias, delta_softplus);
    fill_out(params, out);
    params.x_ptr = x.data_ptr();
    std::vector<Tensor> results{out, x};
    if (z.has_value()) {
        check_sequence(*z, "z", u.scalar_type(), {s.batch, s.dim, s.seqlen});
        Tensor out_z = torch::stable::empty_like(*z);
        fill_gate(params, *z, out_z);
        results.push_back(out_z);
    }

    // The kernels launch on the current stream of u's device, not of device 0.
    const torch::stable::accelerator::DeviceGuard guard(u.get_device_index());
    const cudaStream_t stream = current_stream(u);
    MAMBAWIN_DISPATCH_INPUT(u.scalar_type(), "selective_scan_fwd", [&] {
        DISPATCH_WTYPE_FLOAT_ONLY(A.scalar_type(), "selective_scan_fwd", [&] {
            selective_scan_fwd_cuda<input_t, weight_t>(params, stream);
        });
    });
    return results;
}

using BwdResults =
    std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

// Results: du, ddelta, dA, dB, dC, dD, ddelta_bias, dz, out_z; every one new. dD, ddelta_bias,
// dz (when the caller passed dz, which is written in place) and out_z (without recompute_out_z)
// are 0-element tensors when the call produces none.
BwdResults selective_scan_bwd(const Tensor &u, const Tensor &delta, const Tensor &A,
                                       const Tensor &B, const Tensor &C, const OptionalTensor &D,
                                       const OptionalTensor &z, const OptionalTensor &delta_bias,
                                       const Tensor &dout, const OptionalTensor &x,
                                       const OptionalTensor &out, OptionalTensor dz,
                                       bool delta_softplus, bool recompute_out_z) {
    const ScalarType input = u.scalar_type();
    check_types(input, A.scalar_type(), "selective_scan_bwd");
    const Sizes s = read_sizes(u, A, B, C);
    check_operands(u, delta, A, B, C, D, delta_bias, s);
    check_sequence(dout, "dout", input, {s.batch, s.dim, s.seqlen});
    STD_TORCH_CHECK(s.n_chunks == 1 || x.has_value(),
                    "selective_scan_bwd: x (fwd's saved states) is required when seqlen > ",
                    kChunk);
    if (x.has_value()) {
        check_dtype(*x, "x", A.scalar_type());
        check_cuda(*x, "x");
        STD_TORCH_CHECK(x->is_contiguous(), "selective_scan_bwd: x must be contiguous");
        check_shape(*x, "x", {s.batch, s.dim, s.n_chunks, 2 * s.dstate});
    }

    if (z.has_value()) {
        STD_TORCH_CHECK(out.has_value(),
                        "selective_scan_bwd: out (fwd's output) is required with z");
        check_sequence(*z, "z", input, {s.batch, s.dim, s.seqlen});
        check_sequence(*out, "out", input, {s.batch, s.dim, s.seqlen});
        if (dz.has_value()) { check_sequence(*dz, "dz", input, {s.batch, s.dim, s.seqlen}); }
    }

    Tensor du = torch::stable::empty_like(u);
    Tensor ddelta = torch::stable::empty_like(delta);
    Tensor dA = zeros_like(A);
    // Time-variant dB/dC accumulate atomically in float32, then take B's/C's dtype.
    Tensor dB = s.variable_B ? torch::stable::new_zeros(B, B.sizes(), ScalarType::Float)
                             : zeros_like(B);
    Tensor dC = s.variable_C ? torch::stable::new_zeros(C, C.sizes(), ScalarType::Float)
                             : zeros_like(C);
    OptionalTensor dD, ddelta_bias;
    if (D.has_value()) { dD = zeros_like(*D); }
    if (delta_bias.has_value()) { ddelta_bias = zeros_like(*delta_bias); }

    SSMParamsBwd params;
    fill_inputs(params, s, u, delta, A, B, C, D, delta_bias, delta_softplus);
    params.x_ptr = data_or_null(x);
    // Without z the bwd kernel never reads out: dout stands in, as in upstream's binding.
    fill_out(params, z.has_value() ? *out : dout);
    const auto none = [&u] { return torch::stable::new_empty(u, {0}); };
    Tensor dz_result = none(), out_z_result = none();
    if (z.has_value()) {
        if (!dz.has_value()) {
            dz = torch::stable::empty_like(*z);
            dz_result = *dz;
        }
        Tensor out_z = recompute_out_z ? torch::stable::empty_like(*out) : dout;
        fill_gate(params, *z, out_z);
        if (recompute_out_z) {
            out_z_result = out_z;
        } else {
            params.out_z_ptr = nullptr;  // nothing to recompute: the kernel skips out_z
        }
        params.dz_ptr = dz->data_ptr();
        params.dz_batch_stride = stride(*dz, 0);
        params.dz_d_stride = stride(*dz, 1);
    }

    params.dout_ptr = dout.data_ptr();
    params.dout_batch_stride = stride(dout, 0);
    params.dout_d_stride = stride(dout, 1);
    params.du_ptr = du.data_ptr();
    params.du_batch_stride = stride(du, 0);
    params.du_d_stride = stride(du, 1);
    params.ddelta_ptr = ddelta.data_ptr();
    params.ddelta_batch_stride = stride(ddelta, 0);
    params.ddelta_d_stride = stride(ddelta, 1);
    params.dA_ptr = dA.data_ptr();
    params.dA_d_stride = stride(dA, 0);
    params.dA_dstate_stride = stride(dA, 1);
    const StateStrides db = state_strides(dB, s.variable_B);
    params.dB_ptr = dB.data_ptr();
    params.dB_batch_stride = db.batch;
    params.dB_group_stride = db.group;
    params.dB_d_stride = db.d;
    params.dB_dstate_stride = db.dstate;
    const StateStrides dc = state_strides(dC, s.variable_C);
    params.dC_ptr = dC.data_ptr();
    params.dC_batch_stride = dc.batch;
    params.dC_group_stride = dc.group;
    params.dC_d_stride = dc.d;
    params.dC_dstate_stride = dc.dstate;
    params.dD_ptr = data_or_null(dD);
    params.ddelta_bias_ptr = data_or_null(ddelta_bias);

    const torch::stable::accelerator::DeviceGuard guard(u.get_device_index());
    const cudaStream_t stream = current_stream(u);
    MAMBAWIN_DISPATCH_INPUT(input, "selective_scan_bwd", [&] {
        DISPATCH_WTYPE_FLOAT_ONLY(A.scalar_type(), "selective_scan_bwd", [&] {
            selective_scan_bwd_cuda<input_t, weight_t>(params, stream);
        });
    });

    return {du,
            ddelta,
            dA,
            torch::stable::to(dB, B.scalar_type()),
            torch::stable::to(dC, C.scalar_type()),
            dD.has_value() ? *dD : none(),
            ddelta_bias.has_value() ? *ddelta_bias : none(),
            dz_result,
            out_z_result};
}

}  // namespace

STABLE_TORCH_LIBRARY(selective_scan_cuda, m) {
    m.def("@FWD_SCHEMA@");
    m.def("@BWD_SCHEMA@");
}

STABLE_TORCH_LIBRARY_IMPL(selective_scan_cuda, CUDA, m) {
    m.impl("fwd", TORCH_BOX(&selective_scan_fwd));
    m.impl("bwd", TORCH_BOX(&selective_scan_bwd));
}
"""
    )
    .replace("@FWD_SCHEMA@", FWD_SCHEMA)
    .replace("@BWD_SCHEMA@", BWD_SCHEMA)
    .replace("@NO_COMPLEX@", NO_COMPLEX)
)
