// kafka-reassign-partitions.sh in one JVM that stays up: scripts/bench_reassign.py starts it
// once, before anything is measured, and sends it one command per line on stdin (the tool's
// arguments, separated by tabs); it runs Kafka's own ReassignPartitionsCommand.main with them
// and ends its output with a line "@@done <exit code>". Started per move, the tool's JVM spends
// about a second of CPU on the load generator's core, which the benchmark would otherwise count
// as the broker's latency. Run as a single-file source program:
//   java -cp <Kafka 4.4's class path> scripts/WarmReassignTool.java
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.internals.Exit;
import org.apache.kafka.tools.reassign.ReassignPartitionsCommand;

public class WarmReassignTool {
    /** Thrown by the tool's Exit.exit: the command failed with this code. */
    static final class Exited extends RuntimeException {
        final int code;

        Exited(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> {
            throw new Exited(code);
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            int code = 0;
            try {
                ReassignPartitionsCommand.main(line.split("\t"));
            } catch (Exited e) {
                code = e.code;
            } catch (Throwable t) {
                t.printStackTrace(System.out);
                code = 1;
            }
            System.out.println("@@done " + code);
            System.out.flush();
        }
    }
}
