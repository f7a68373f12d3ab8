/** The inference engine: model loading, kernels, the forward pass by layer range, the stage runtime and the coordinator. */
package io.tnsr.engine;
