"""The C++ text of causal-conv1d's stable-ABI binding (written by the stable-binding patch).

mambawin's own code, written from the ops' signatures and ConvParamsBase/ConvParamsBwd's fields
(csrc/causal_conv1d.h): it checks the same conditions upstream's binding checks, fills the same
parameters and launches the same kernel templates, through torch's stable C ABI only
(torch::stable::Tensor, STD_TORCH_CHECK, the aoti_torch_* shims). Every op takes its outputs as
arguments and returns nothing, as upstream's binding does from v1.5.1 on; the Python shim
(stable_shim.py) allocates them for the v1.5.0.x shape. `binding(deterministic=...)` adds the
v1.6.0+ deterministic backward (workspaces summed afterwards), its flag an argument of the op.
"""

from __future__ import annotations

_HEAD = """\
// causal-conv1d's ops on torch's stable C ABI: written by mambawin's stable-binding patch
// (`mambawin build --abi stable`), replacing upstream's pybind11 binding. A plain shared library:
// no Python.h, no pybind11, no c10/ATen; STABLE_TORCH_LIBRARY registers the ops when
// torch.ops.load_library loads it, and causal_conv1d_cuda.py binds upstream's names to them.

#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/shim_utils.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include "causal_conv1d.h"

template <typename input_t, typename weight_t>
void causal_conv1d_fwd_cuda(ConvParamsBase &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void causal_conv1d_channellast_fwd_cuda(ConvParamsBase &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void causal_conv1d_bwd_cuda(ConvParamsBwd &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void causal_conv1d_channellast_bwd_cuda(ConvParamsBwd &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void causal_conv1d_update_cuda(ConvParamsBase &params, cudaStream_t stream);

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptionalTensor = std::optional<Tensor>;

#define CHECK_SHAPE(x, ...) \\
    STD_TORCH_CHECK((x).sizes().equals({__VA_ARGS__}), #x " must have shape (" #__VA_ARGS__ ")")

template <typename T>
struct TypeTag {
    using type = T;
};

// Calls body with a TypeTag of the C++ type for t: the three dtypes the kernels are built for.
template <typename Body>
void with_element_type(ScalarType t, const char *op, const char *what, Body &&body) {
    switch (t) {
        case ScalarType::Half:
            body(TypeTag<torch::headeronly::Half>{});
            return;
        case ScalarType::BFloat16:
            body(TypeTag<torch::headeronly::BFloat16>{});
            return;
        case ScalarType::Float:
            body(TypeTag<float>{});
            return;
        default:
            STD_TORCH_CHECK(false, op, " not implemented for ", what, " type '",
                            torch::headeronly::toString(t), "'");
    }
}

bool is_kernel_type(ScalarType t) {
    return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16;
}

// The caller's current CUDA stream on x's device (what at::cuda::getCurrentCUDAStream gave).
// aoti_torch_get_current_cuda_stream is declared only with USE_CUDA (setup.py defines it).
cudaStream_t current_stream(const Tensor &x) {
    void *stream = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(x.get_device_index(), &stream));
    return static_cast<cudaStream_t>(stream);
}

void *data_or_null(const OptionalTensor &t) {
    return t.has_value() ? t->data_ptr() : nullptr;
}

void fill_fwd_params(ConvParamsBase &params, int batch, int dim, int seqlen, int width,
                     const Tensor &x, const Tensor &weight, const Tensor &out, void *bias_ptr,
                     bool silu_activation) {
    std::memset(&params, 0, sizeof(params));
    params.batch = batch;
    params.dim = dim;
    params.seqlen = seqlen;
    params.width = width;
    params.silu_activation = silu_activation;
    params.x_ptr = x.data_ptr();
    params.weight_ptr = weight.data_ptr();
    params.bias_ptr = bias_ptr;
    params.out_ptr = out.data_ptr();
    // Strides in elements, as the kernels index.
    params.x_batch_stride = x.stride(0);
    params.x_c_stride = x.stride(1);
    params.x_l_stride = x.stride(-1);
    params.weight_c_stride = weight.stride(0);
    params.weight_width_stride = weight.stride(1);
    params.out_batch_stride = out.stride(0);
    params.out_c_stride = out.stride(1);
    params.out_l_stride = out.stride(-1);
}

void check_bias(const OptionalTensor &bias, ScalarType weight_type, int dim) {
    if (!bias.has_value()) {
        return;
    }
    STD_TORCH_CHECK(bias->scalar_type() == weight_type);
    STD_TORCH_CHECK(bias->is_cuda());
    STD_TORCH_CHECK(bias->stride(-1) == 1);
    CHECK_SHAPE(*bias, dim);
}

void check_seq_idx(const OptionalTensor &seq_idx, bool is_channel_last, int batch_size,
                   int seqlen) {
    if (!seq_idx.has_value()) {
        return;
    }
    STD_TORCH_CHECK(is_channel_last, "seq_idx is only supported for channel last layout");
    STD_TORCH_CHECK(seq_idx->scalar_type() == ScalarType::Int);
    STD_TORCH_CHECK(seq_idx->is_cuda());
    STD_TORCH_CHECK(seq_idx->is_contiguous());
    CHECK_SHAPE(*seq_idx, batch_size, seqlen);
}

// initial_states / final_states / dinitial_states: (batch, dim, width - 1), channel stride 1.
void check_states(const Tensor &states, const char *name, bool is_channel_last,
                  ScalarType input_type, int batch_size, int dim, int width) {
    STD_TORCH_CHECK(is_channel_last, name, " is only supported for channel last layout");
    STD_TORCH_CHECK(states.scalar_type() == input_type);
    STD_TORCH_CHECK(states.is_cuda());
    CHECK_SHAPE(states, batch_size, dim, width - 1);
}

constexpr const char *kDimMessage =
    "causal_conv1d only supports channel dimension divisible by 8 for now";
constexpr const char *kWidthMessage = "causal_conv1d only supports width between 2 and 4";

void check_channel_last_strides(const Tensor &t, const char *name) {
    STD_TORCH_CHECK(t.stride(2) % 8 == 0 && t.stride(0) % 8 == 0,
                    "causal_conv1d with channel last layout requires strides (", name,
                    ".stride(0) and ", name, ".stride(2)) to be multiples of 8");
}

}  // namespace

void causal_conv1d_fwd(Tensor x, Tensor weight, OptionalTensor bias, OptionalTensor seq_idx,
                       OptionalTensor initial_states, Tensor out,
                       OptionalTensor final_states_out, bool silu_activation) {
    const ScalarType input_type = x.scalar_type();
    const ScalarType weight_type = weight.scalar_type();
    STD_TORCH_CHECK(is_kernel_type(input_type));
    STD_TORCH_CHECK(is_kernel_type(weight_type));
    STD_TORCH_CHECK(x.is_cuda());
    STD_TORCH_CHECK(weight.is_cuda());

    const auto sizes = x.sizes();
    const int batch_size = sizes[0];
    const int dim = sizes[1];
    const int seqlen = sizes[2];
    const int width = weight.size(-1);
    CHECK_SHAPE(x, batch_size, dim, seqlen);
    CHECK_SHAPE(weight, dim, width);

    STD_TORCH_CHECK(x.stride(2) == 1 || x.stride(1) == 1);
    const bool is_channel_last = x.stride(1) == 1 && x.stride(2) > 1;
    if (is_channel_last) {
        STD_TORCH_CHECK(dim % 8 == 0, kDimMessage);
        check_channel_last_strides(x, "x");
    }
    STD_TORCH_CHECK(width >= 2 && width <= 4, kWidthMessage);
    check_bias(bias, weight_type, dim);
    check_seq_idx(seq_idx, is_channel_last, batch_size, seqlen);

    ConvParamsBase params;
    fill_fwd_params(params, batch_size, dim, seqlen, width, x, weight, out, data_or_null(bias),
                    silu_activation);
    params.seq_idx_ptr = data_or_null(seq_idx);
    if (initial_states.has_value()) {
        check_states(*initial_states, "initial_states", is_channel_last, input_type, batch_size,
                     dim, width);
        STD_TORCH_CHECK(initial_states->stride(1) == 1);
        params.initial_states_ptr = initial_states->data_ptr();
        params.initial_states_batch_stride = initial_states->stride(0);
        params.initial_states_c_stride = initial_states->stride(1);
        params.initial_states_l_stride = initial_states->stride(2);
    }
    if (final_states_out.has_value()) {
        check_states(*final_states_out, "final_states", is_channel_last, input_type, batch_size,
                     dim, width);
        STD_TORCH_CHECK(final_states_out->stride(1) == 1);
        params.final_states_ptr = final_states_out->data_ptr();
        params.final_states_batch_stride = final_states_out->stride(0);
        params.final_states_c_stride = final_states_out->stride(1);
        params.final_states_l_stride = final_states_out->stride(2);
    }

    // Launch on x's device, not the current one (cuda:0 unless the caller switched).
    torch::stable::accelerator::DeviceGuard device_guard(x.get_device_index());
    cudaStream_t stream = current_stream(x);
    with_element_type(input_type, "causal_conv1d_fwd", "input", [&](auto in) {
        with_element_type(weight_type, "causal_conv1d_fwd", "weight", [&](auto w) {
            using input_t = typename decltype(in)::type;
            using weight_t = typename decltype(w)::type;
            if (!is_channel_last) {
                causal_conv1d_fwd_cuda<input_t, weight_t>(params, stream);
            } else {
                causal_conv1d_channellast_fwd_cuda<input_t, weight_t>(params, stream);
            }
        });
    });
}
@DETERMINISM_HELPERS@
void causal_conv1d_bwd(Tensor x, Tensor weight, OptionalTensor bias, Tensor dout,
                       OptionalTensor seq_idx, OptionalTensor initial_states,
                       OptionalTensor dfinal_states, Tensor dx, Tensor dweight,
                       OptionalTensor dbias, OptionalTensor dinitial_states,
                       bool silu_activation@DETERMINISTIC_PARAMETER@) {
    const ScalarType input_type = x.scalar_type();
    const ScalarType weight_type = weight.scalar_type();
    STD_TORCH_CHECK(is_kernel_type(input_type));
    STD_TORCH_CHECK(is_kernel_type(weight_type));
    STD_TORCH_CHECK(x.is_cuda());
    STD_TORCH_CHECK(weight.is_cuda());
    STD_TORCH_CHECK(dout.is_cuda());
    STD_TORCH_CHECK(bias.has_value() == dbias.has_value());

    const auto sizes = x.sizes();
    const int batch_size = sizes[0];
    const int dim = sizes[1];
    const int seqlen = sizes[2];
    const int width = weight.size(-1);
    STD_TORCH_CHECK(width >= 2 && width <= 4, kWidthMessage);
    CHECK_SHAPE(x, batch_size, dim, seqlen);
    CHECK_SHAPE(weight, dim, width);
    CHECK_SHAPE(dout, batch_size, dim, seqlen);

    STD_TORCH_CHECK(x.stride(2) == 1 || x.stride(1) == 1);
    const bool is_channel_last = x.stride(1) == 1 && x.stride(2) > 1;
    // The kernels read dout in x's layout: a local copy when the caller's differs.
    if (!is_channel_last && dout.stride(2) != 1) {
        dout = torch::stable::contiguous(dout);
    }
    if (is_channel_last && dout.stride(1) != 1) {
        dout = torch::stable::transpose(
            torch::stable::contiguous(torch::stable::transpose(dout, 1, 2)), 1, 2);
    }
    if (is_channel_last) {
        STD_TORCH_CHECK(dim % 8 == 0, kDimMessage);
        check_channel_last_strides(x, "x");
        check_channel_last_strides(dout, "dout");
    }
    check_bias(bias, weight_type, dim);
    check_seq_idx(seq_idx, is_channel_last, batch_size, seqlen);

    STD_TORCH_CHECK(dx.scalar_type() == input_type);
    STD_TORCH_CHECK(dx.is_cuda());
    CHECK_SHAPE(dx, batch_size, dim, seqlen);
    STD_TORCH_CHECK(is_channel_last ? dx.stride(1) == 1 : dx.stride(2) == 1);

    torch::stable::accelerator::DeviceGuard device_guard(x.get_device_index());
    ConvParamsBwd params;
    std::memset(&params, 0, sizeof(params));  // every pointer not set below stays null
    // dout stands in for out: the backward never reads the forward's output.
    fill_fwd_params(params, batch_size, dim, seqlen, width, x, weight, dout, data_or_null(bias),
                    silu_activation);
    params.dout_ptr = dout.data_ptr();
    params.dx_ptr = dx.data_ptr();
    params.dweight_ptr = dweight.data_ptr();
    params.dbias_ptr = data_or_null(dbias);
    params.dout_batch_stride = dout.stride(0);
    params.dout_c_stride = dout.stride(1);
    params.dout_l_stride = dout.stride(2);
    params.dweight_c_stride = dweight.stride(0);
    params.dweight_width_stride = dweight.stride(1);
    params.dx_batch_stride = dx.stride(0);
    params.dx_c_stride = dx.stride(1);
    params.dx_l_stride = dx.stride(2);
    params.seq_idx_ptr = data_or_null(seq_idx);
    if (initial_states.has_value()) {
        check_states(*initial_states, "initial_states", is_channel_last, input_type, batch_size,
                     dim, width);
        STD_TORCH_CHECK(initial_states->stride(1) == 1);
        params.initial_states_ptr = initial_states->data_ptr();
        params.initial_states_batch_stride = initial_states->stride(0);
        params.initial_states_c_stride = initial_states->stride(1);
        params.initial_states_l_stride = initial_states->stride(2);
    }
    if (dfinal_states.has_value()) {
        check_states(*dfinal_states, "dfinal_states", is_channel_last, input_type, batch_size,
                     dim, width);
        params.dfinal_states_ptr = dfinal_states->data_ptr();
        params.dfinal_states_batch_stride = dfinal_states->stride(0);
        params.dfinal_states_c_stride = dfinal_states->stride(1);
        params.dfinal_states_l_stride = dfinal_states->stride(2);
    }
    if (dinitial_states.has_value()) {
        STD_TORCH_CHECK(dinitial_states->stride(1) == 1);
        params.dinitial_states_ptr = dinitial_states->data_ptr();
        params.dinitial_states_batch_stride = dinitial_states->stride(0);
        params.dinitial_states_c_stride = dinitial_states->stride(1);
        params.dinitial_states_l_stride = dinitial_states->stride(2);
    }
@DETERMINISM_BEFORE@
    cudaStream_t stream = current_stream(x);
    with_element_type(input_type, "causal_conv1d_bwd", "input", [&](auto in) {
        with_element_type(weight_type, "causal_conv1d_bwd", "weight", [&](auto w) {
            using input_t = typename decltype(in)::type;
            using weight_t = typename decltype(w)::type;
            if (!is_channel_last) {
                causal_conv1d_bwd_cuda<input_t, weight_t>(params, stream);
            } else {
                causal_conv1d_channellast_bwd_cuda<input_t, weight_t>(params, stream);
            }
        });
    });
@DETERMINISM_AFTER@}

void causal_conv1d_update(Tensor x, Tensor conv_state, Tensor weight, OptionalTensor bias,
                          Tensor out, bool silu_activation, OptionalTensor cache_seqlens,
                          OptionalTensor conv_state_indices) {
    const ScalarType input_type = x.scalar_type();
    const ScalarType weight_type = weight.scalar_type();
    STD_TORCH_CHECK(is_kernel_type(input_type));
    STD_TORCH_CHECK(is_kernel_type(weight_type));
    STD_TORCH_CHECK(conv_state.scalar_type() == input_type);
    STD_TORCH_CHECK(x.is_cuda());
    STD_TORCH_CHECK(conv_state.is_cuda());
    STD_TORCH_CHECK(weight.is_cuda());

    const auto sizes = x.sizes();
    const int batch_size = sizes[0];
    const int dim = sizes[1];
    const int seqlen = sizes[2];
    const int width = weight.size(-1);
    const int conv_state_len = conv_state.size(2);
    STD_TORCH_CHECK(conv_state_len >= width - 1);
    CHECK_SHAPE(x, batch_size, dim, seqlen);
    CHECK_SHAPE(weight, dim, width);
    STD_TORCH_CHECK(width >= 2 && width <= 4, kWidthMessage);
    check_bias(bias, weight_type, dim);

    ConvParamsBase params;
    fill_fwd_params(params, batch_size, dim, seqlen, width, x, weight, out, data_or_null(bias),
                    silu_activation);
    params.conv_state_ptr = conv_state.data_ptr();
    params.conv_state_len = conv_state_len;
    params.conv_state_batch_stride = conv_state.stride(0);
    params.conv_state_c_stride = conv_state.stride(1);
    params.conv_state_l_stride = conv_state.stride(2);
    if (conv_state_indices.has_value()) {
        STD_TORCH_CHECK(conv_state_indices->scalar_type() == ScalarType::Int);
        STD_TORCH_CHECK(conv_state_indices->is_cuda());
        STD_TORCH_CHECK(conv_state_indices->stride(0) == 1);
        CHECK_SHAPE(*conv_state_indices, batch_size);
        const int conv_state_entries = conv_state.size(0);
        CHECK_SHAPE(conv_state, conv_state_entries, dim, conv_state_len);
        params.conv_state_indices_ptr = static_cast<int32_t *>(conv_state_indices->data_ptr());
    } else {
        CHECK_SHAPE(conv_state, batch_size, dim, conv_state_len);
    }
    if (cache_seqlens.has_value()) {
        STD_TORCH_CHECK(cache_seqlens->scalar_type() == ScalarType::Int);
        STD_TORCH_CHECK(cache_seqlens->is_cuda());
        STD_TORCH_CHECK(cache_seqlens->stride(-1) == 1);
        CHECK_SHAPE(*cache_seqlens, batch_size);
        params.cache_seqlens = static_cast<int32_t *>(cache_seqlens->data_ptr());
    }

    torch::stable::accelerator::DeviceGuard device_guard(x.get_device_index());
    cudaStream_t stream = current_stream(x);
    with_element_type(input_type, "causal_conv1d_update", "input", [&](auto in) {
        with_element_type(weight_type, "causal_conv1d_update", "weight", [&](auto w) {
            using input_t = typename decltype(in)::type;
            using weight_t = typename decltype(w)::type;
            causal_conv1d_update_cuda<input_t, weight_t>(params, stream);
        });
    });
}

// The schemas say which arguments each op writes (Tensor(a!)), so torch.compile and
// functionalization know the outputs; `-> ()`: results come back through those arguments.
STABLE_TORCH_LIBRARY(@NAMESPACE@, m) {
    m.def("causal_conv1d_fwd(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx, "
          "Tensor? initial_states, Tensor(a!) out, Tensor(b!)? final_states_out, "
          "bool silu_activation) -> ()");
    m.def("causal_conv1d_bwd(Tensor x, Tensor weight, Tensor? bias, Tensor dout, "
          "Tensor? seq_idx, Tensor? initial_states, Tensor? dfinal_states, Tensor(a!) dx, "
          "Tensor(b!) dweight, Tensor(c!)? dbias, Tensor(d!)? dinitial_states, "
          "bool silu_activation@DETERMINISTIC_SCHEMA@) -> ()");
    m.def("causal_conv1d_update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, "
          "Tensor(b!) out, bool silu_activation, Tensor? cache_seqlens, "
          "Tensor? conv_state_indices) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(@NAMESPACE@, CUDA, m) {
    m.impl("causal_conv1d_fwd", TORCH_BOX(&causal_conv1d_fwd));
    m.impl("causal_conv1d_bwd", TORCH_BOX(&causal_conv1d_bwd));
    m.impl("causal_conv1d_update", TORCH_BOX(&causal_conv1d_update));
}
"""

# v1.6.0+: ConvParamsBwd has `deterministic` and per-batch (channel-first) or per-chunk
# (channel-last) float workspaces that the kernels fill instead of atomically adding into dweight
# and dbias; the binding sums them afterwards. Upstream read the flag from the environment and
# at::globalContext() inside the binding; neither exists on the stable ABI, so the shim decides
# it in Python (same rules) and passes it in.
_DETERMINISM_HELPERS = """
namespace {

// target += workspace summed over dims: the workspaces are float, as dweight and dbias are.
void add_sum_into(Tensor target, const Tensor &workspace, std::initializer_list<int64_t> dims) {
    Tensor summed = torch::stable::sum(
        workspace, torch::headeronly::IntHeaderOnlyArrayRef(dims), false, std::nullopt);
    Tensor total = torch::stable::subtract(target, summed, -1.0);  // target + summed
    torch::stable::copy_(target, total);
}

}  // namespace
"""

_DETERMINISM_BEFORE = """
    params.deterministic = deterministic;
    std::optional<Tensor> dweight_workspace;
    std::optional<Tensor> dbias_workspace;
    if (deterministic) {
        // Channel-first: one slot per batch row; channel-last: one per (batch, chunk of L).
        const int chunk = seqlen <= 128 ? 64 : 128;
        const int n_chunks = (seqlen + chunk - 1) / chunk;
        if (!is_channel_last) {
            dweight_workspace.emplace(torch::stable::new_zeros(
                x, {batch_size, dim, width}, ScalarType::Float));
            params.dweight_workspace_dim_stride = dweight_workspace->stride(1);
        } else {
            dweight_workspace.emplace(torch::stable::new_zeros(
                x, {batch_size, n_chunks, dim, width}, ScalarType::Float));
            params.dweight_workspace_dim_stride = dweight_workspace->stride(2);
        }
        params.dweight_workspace_ptr = dweight_workspace->data_ptr();
        params.dweight_workspace_batch_stride = dweight_workspace->stride(0);
        if (dbias.has_value()) {
            if (!is_channel_last) {
                dbias_workspace.emplace(
                    torch::stable::new_zeros(x, {batch_size, dim}, ScalarType::Float));
            } else {
                dbias_workspace.emplace(torch::stable::new_zeros(
                    x, {batch_size, n_chunks, dim}, ScalarType::Float));
            }
            params.dbias_workspace_ptr = dbias_workspace->data_ptr();
            params.dbias_workspace_batch_stride = dbias_workspace->stride(0);
        }
    }
"""

_DETERMINISM_AFTER = """
    if (deterministic) {
        if (!is_channel_last) {
            add_sum_into(dweight, *dweight_workspace, {0});
            if (dbias.has_value()) {
                add_sum_into(*dbias, *dbias_workspace, {0});
            }
        } else {
            add_sum_into(dweight, *dweight_workspace, {0, 1});
            if (dbias.has_value()) {
                add_sum_into(*dbias, *dbias_workspace, {0, 1});
            }
        }
    }
"""


def binding(namespace: str, *, deterministic: bool) -> str:
    """The binding's C++ text: ops in torch.ops.<namespace>; deterministic: the v1.6.0+ bwd."""
    parts = {
        "@NAMESPACE@": namespace,
        "@DETERMINISM_HELPERS@": _DETERMINISM_HELPERS if deterministic else "",
        "@DETERMINISTIC_PARAMETER@": ", bool deterministic" if deterministic else "",
        "@DETERMINISM_BEFORE@": _DETERMINISM_BEFORE if deterministic else "",
        "@DETERMINISM_AFTER@": _DETERMINISM_AFTER if deterministic else "",
        "@DETERMINISTIC_SCHEMA@": ", bool deterministic" if deterministic else "",
    }
    text = _HEAD
    for key, value in parts.items():
        text = text.replace(key, value)
    return text
