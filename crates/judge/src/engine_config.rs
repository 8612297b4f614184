//! The wasmtime configuration of the predicate sandbox. The build script compiles the built-in
//! `std` ahead of time with this same configuration (it includes this file), so the artifact
//! it embeds is compatible with the engine the judge builds at run time.

use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig, Strategy, WasmFeatures};

/// Guest call-stack limit.
pub const MAX_WASM_STACK: usize = 512 << 10;

/// Bytes of each linear memory slot kept resident (zeroed in place) between instances: a
/// typical bundle's instance touches well under this.
pub const KEEP_RESIDENT: usize = 4 << 20;

/// The engine configuration: `max_memory` is the most linear memory any one instance may
/// have, `slots` how many instances may exist at once.
pub fn config(max_memory: usize, slots: u32) -> Config {
    let mut cfg = Config::new();
    cfg.strategy(Strategy::Cranelift)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_nan_canonicalization(true)
        .relaxed_simd_deterministic(true)
        // Proposals that bring nondeterminism, shared state or new ways to allocate stay
        // off (wasmtime's threads, GC and async support are also compiled out).
        .wasm_features(
            WasmFeatures::THREADS
                | WasmFeatures::SHARED_EVERYTHING_THREADS
                | WasmFeatures::RELAXED_SIMD
                | WasmFeatures::GC
                | WasmFeatures::FUNCTION_REFERENCES
                | WasmFeatures::EXCEPTIONS
                | WasmFeatures::LEGACY_EXCEPTIONS
                | WasmFeatures::STACK_SWITCHING
                | WasmFeatures::MEMORY64
                | WasmFeatures::MULTI_MEMORY
                | WasmFeatures::CUSTOM_PAGE_SIZES
                | WasmFeatures::CM_ASYNC,
            false,
        )
        .wasm_component_model(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .parallel_compilation(true);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots * 4)
        .total_memories(slots * 2)
        .total_tables(slots * 4)
        .max_memory_size(max_memory)
        .max_memories_per_module(1)
        // A slot's first pages are reset in place when it is freed rather than handed back
        // to the kernel: the next instance reuses them without page faults, and sees only
        // what a fresh mapping holds. Where the kernel can say which pages were touched
        // (PAGEMAP_SCAN, Linux 6.7+) only those are reset, so the cost follows what a call
        // used rather than the size of its memory.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    cfg
}
