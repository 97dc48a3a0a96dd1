package sluice.compat;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Assertions for the scenario programs: a failed check throws, the program exits 1. */
final class Check {
    private Check() {}

    static void that(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError("check failed: " + what);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new AssertionError("check failed: " + what + ": expected <" + expected
                    + "> but was <" + actual + ">");
        }
    }

    /** Polls `condition` every 100 ms until it holds; throws after `timeout`. */
    static void eventually(Duration timeout, String what, BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for "
                        + what);
            }
            Thread.sleep(100);
        }
    }

    /** Prints a progress line (the pytest driver shows it when a scenario fails). */
    static void log(String line) {
        System.out.println("[" + java.time.LocalTime.now() + "] " + line);
        System.out.flush();
    }
}
