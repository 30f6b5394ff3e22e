package rockafka.compat.tools;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * Runs mqadmin's own entry point unchanged, without its client's slow wind-down.
 *
 * <p>Every mqadmin command ends by shutting down its admin client, which joins remoting threads
 * that only notice the stop at their next 3-second poll: five to six seconds per command, and the
 * tests run hundreds of commands. A watcher interrupts the main thread whenever it waits inside
 * a RocketMQ {@code shutdown}; the shutdown then goes on without waiting (RocketMQ catches the
 * interrupt), the command prints what it prints after its shutdown (errors included), and the
 * JVM ends when mqadmin's main returns, without waiting for the remoting threads to finish.
 */
public final class MQAdminMain {
    private MQAdminMain() {
    }

    public static void main(String[] args) {
        Thread main = Thread.currentThread();
        Thread watcher = new Thread(() -> {
            while (true) {
                if (waitingInShutdown(main.getStackTrace())) {
                    main.interrupt();
                }
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "mqadmin-shutdown-watcher");
        watcher.setDaemon(true);
        watcher.start();
        MQAdminStartup.main(args);
        Thread.interrupted();
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(0);
    }

    private static boolean waitingInShutdown(StackTraceElement[] stack) {
        if (stack.length == 0) {
            return false;
        }
        String top = stack[0].getClassName() + "." + stack[0].getMethodName();
        if (!top.equals("java.lang.Object.wait") && !top.equals("java.lang.Thread.sleep")
                && !top.equals("jdk.internal.misc.Unsafe.park")) {
            return false;
        }
        for (StackTraceElement frame : stack) {
            if (frame.getMethodName().equals("shutdown") && frame.getClassName().startsWith("org.apache.rocketmq.")) {
                return true;
            }
        }
        return false;
    }
}
