/**
 * Deliberately regressed variants of the gate's benchmarks, compiled into the perf module only so that
 * {@code tools/perf-gate --self-test} can show that the gate catches them. Nothing outside this package uses
 * them; the production classes contain no switch for them. Their class names do not contain "Benchmark", so a
 * {@code tools/jmh XxxBenchmark} regexp never runs them by accident.
 * <ul>
 * <li>{@link io.tnsr.perf.gate.injected.InjectedSlowKernel}: a kernel 2x slower (every matmul done twice) or 10%
 * slower;</li>
 * <li>{@link io.tnsr.perf.gate.injected.InjectedSlowLayer}: a layer decode 10% slower;</li>
 * <li>{@link io.tnsr.perf.gate.injected.InjectedAllocatingCodec}: a decoder whose frame handler allocates a
 * record per frame;</li>
 * <li>{@link io.tnsr.perf.gate.injected.InjectedCopyingHop}: a hop that stages every frame through a heap copy
 * before writing it.</li>
 * </ul>
 */
package io.tnsr.perf.gate.injected;
