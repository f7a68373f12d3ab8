/** JMH benchmarks and the performance gate. */
package io.tnsr.perf;
