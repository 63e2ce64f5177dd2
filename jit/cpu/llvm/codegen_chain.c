/* codegen_chain.c — one function for a run of small kernels (plan_decide.c decides which): the
 * members are called in order with their buffers, so the program's step loop, tensor allocation and
 * reference counting happen once for the whole run instead of per op. Values read only inside
 * the run live in stack slots (allocas, shared by values whose lives do not overlap), which LLVM
 * knows alias nothing else; the members become internal, so the optimiser inlines them or
 * specialises them to the constant slot addresses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/cpu/llvm/codegen.h"

static bool contains(const uint32_t *a, uint32_t n, uint32_t id) {
    for (uint32_t k = 0; k < n; k++)
        if (a[k] == id)
            return true;
    return false;
}

typedef struct slot {
    int64_t bytes;
    uint32_t free_after; /* member index after which the slot is free again */
    LLVMValueRef ptr;
} slot;

tj_status jit_cpu_chain_emit(LLVMModuleRef m, const ir_graph *g, const jit_cpu_member *mem,
                             uint32_t n_mem, const uint32_t *ins, uint32_t n_ins,
                             const uint32_t *outs, uint32_t n_outs, const char *name) {
    jit_cpu_em E;
    jit_cpu_em_init(&E, m, false, false);
    jit_cpu_em *e = &E;
    LLVMBuilderRef b = e->b;
    uint32_t nb = n_ins + n_outs, max_bufs = 1, n_vals = 0;
    for (uint32_t i = 0; i < n_mem; i++) {
        n_vals += mem[i].n_out;
        if (mem[i].n_in + mem[i].n_out > max_bufs)
            max_bufs = mem[i].n_in + mem[i].n_out;
    }
    LLVMValueRef *ptrs = calloc(nb + 1, sizeof *ptrs);
    LLVMValueRef *where = calloc(g->n_nodes + 1, sizeof *where);
    slot *slots = calloc(n_vals + 1, sizeof *slots);
    if (!ptrs || !where || !slots) {
        free(ptrs);
        free(where);
        free(slots);
        LLVMDisposeBuilder(b);
        return ir_errorf(TJ_ERR_OOM, "cpu jit: out of memory");
    }
    LLVMValueRef fn = jit_cpu_kernel_begin(e, name, nb, ptrs);
    for (uint32_t i = 0; i < n_ins; i++)
        where[ins[i]] = ptrs[i];
    for (uint32_t i = 0; i < n_outs; i++)
        where[outs[i]] = ptrs[n_ins + i];
    LLVMTypeRef arr = LLVMArrayType2(e->ptr, max_bufs);
    LLVMValueRef local = LLVMBuildAlloca(b, arr, "bufs");
    uint32_t n_slots = 0;
    for (uint32_t i = 0; i < n_mem; i++) {
        /* members' intermediate outputs take a free slot of their size, or a new one */
        for (uint32_t k = 0; k < mem[i].n_out; k++) {
            uint32_t v = mem[i].out[k];
            if (where[v])
                continue;
            const ir_node *n = ir_node_get(g, v);
            int64_t bytes = ir_numel(n->rank, n->dims) * (int64_t)ir_dtype_size(n->dtype);
            uint32_t last = i;
            for (uint32_t j = i + 1; j < n_mem; j++)
                if (contains(mem[j].in, mem[j].n_in, v))
                    last = j;
            uint32_t s = 0;
            while (s < n_slots && !(slots[s].bytes == bytes && slots[s].free_after < i))
                s++;
            if (s == n_slots) {
                LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
                LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
                LLVMValueRef first = LLVMGetFirstInstruction(entry);
                LLVMPositionBuilderBefore(b, first);
                slots[s].ptr =
                    LLVMBuildArrayAlloca(b, e->i8, LLVMConstInt(e->i64, bytes ? bytes : 1, 0), "");
                LLVMSetAlignment(slots[s].ptr, 64);
                LLVMPositionBuilderAtEnd(b, cur);
                slots[s].bytes = bytes;
                n_slots++;
            }
            slots[s].free_after = last;
            where[v] = slots[s].ptr;
        }
        LLVMValueRef f = LLVMGetNamedFunction(m, mem[i].fn);
        if (!f) {
            free(ptrs);
            free(where);
            free(slots);
            LLVMDisposeBuilder(b);
            return ir_errorf(TJ_ERR_RUNTIME, "cpu jit: chain member %s is missing", mem[i].fn);
        }
        LLVMSetLinkage(f, LLVMInternalLinkage);
        for (uint32_t k = 0; k < mem[i].n_in + mem[i].n_out; k++) {
            uint32_t v = k < mem[i].n_in ? mem[i].in[k] : mem[i].out[k - mem[i].n_in];
            LLVMValueRef idx[2] = {LLVMConstInt(e->i64, 0, 0), LLVMConstInt(e->i64, k, 0)};
            LLVMBuildStore(b, where[v], LLVMBuildInBoundsGEP2(b, arr, local, idx, 2, ""));
        }
        LLVMValueRef args[3] = {local, LLVMConstInt(e->i64, 0, 0),
                                LLVMConstInt(e->i64, (unsigned long long)mem[i].n_units, 0)};
        LLVMBuildCall2(b, LLVMGlobalGetValueType(f), f, args, 3, "");
    }
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    free(ptrs);
    free(where);
    free(slots);
    return TJ_OK;
}
