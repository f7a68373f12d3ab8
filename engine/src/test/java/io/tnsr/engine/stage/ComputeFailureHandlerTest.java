package io.tnsr.engine.stage;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What escapes the compute processor's handlers fails the stage, naming the stage and the cause. */
class ComputeFailureHandlerTest {

    @Test
    void anErrorInTheComputeThreadFailsTheStageWithItsCause() {
        List<String> failures = new ArrayList<>();
        ComputeFailureHandler h = new ComputeFailureHandler("stage1", failures::add);
        h.handleEventException(new OutOfMemoryError("Direct buffer memory"), 42, null);
        h.handleOnStartException(new IllegalStateException("no CPU 7"));
        assertEquals(List.of("stage1 compute thread: java.lang.OutOfMemoryError: Direct buffer memory (ring sequence 42)",
                "stage1 compute thread did not start: java.lang.IllegalStateException: no CPU 7"), failures);
    }
}
