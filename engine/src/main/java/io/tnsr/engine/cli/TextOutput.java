package io.tnsr.engine.cli;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.tokenizer.StreamingDecoder;
import io.tnsr.engine.tokenizer.Tokenizer;
import java.io.PrintStream;
import java.util.List;

/**
 * Prints generated text for people: with one sequence, streams it as tokens arrive (the prompt first, when the
 * first token comes, so that start-up lines and progress bars on stderr never land inside the text); with several,
 * prints each whole when it finishes. Silent on stdout in JSON mode. Keeps each sequence's text
 * for the JSON output either way.
 */
public final class TextOutput implements Generator.Listener {
    private final PrintStream out;
    private final boolean stream;
    private final boolean print;
    private final StreamingDecoder[] decoders;
    private final StringBuilder[] texts;
    private final Tokenizer tokenizer;
    private final String prompt;
    private boolean promptShown;

    public TextOutput(PrintStream out, Tokenizer tokenizer, List<SequenceState> seqs, boolean json) {
        this.out = out;
        this.tokenizer = tokenizer;
        this.print = !json;
        this.stream = !json && seqs.size() == 1;
        this.decoders = new StreamingDecoder[seqs.size()];
        this.texts = new StringBuilder[seqs.size()];
        for (SequenceState s : seqs) {
            int[] p = s.promptTokens();
            decoders[s.index()] = tokenizer.newDecoder(p[p.length - 1]);
            texts[s.index()] = new StringBuilder();
        }
        this.prompt = stream ? seqs.get(0).prompt() : null;
    }

    /** Streaming: the prompt, once, before the first text. */
    private void showPrompt() {
        if (!promptShown) {
            promptShown = true;
            out.print(prompt);
        }
    }

    @Override
    public synchronized void onToken(SequenceState seq, int token) {
        StringBuilder sb = texts[seq.index()];
        int before = sb.length();
        decoders[seq.index()].next(token, sb);
        if (stream && sb.length() > before) {
            showPrompt();
            out.append(sb, before, sb.length());
            out.flush();
        }
    }

    @Override
    public synchronized void onFinished(SequenceState seq) {
        StringBuilder sb = texts[seq.index()];
        int before = sb.length();
        decoders[seq.index()].finish(sb);
        if (stream) {
            showPrompt();
            out.append(sb, before, sb.length());
            out.println();
            if (seq.error() != null) {
                out.println("[failed: " + seq.error() + "]");
            }
            out.flush();
        } else if (print) {
            out.println("--- sequence " + seq.index() + " (" + seq.stoppedBy().json() + ") ---");
            out.println(seq.prompt() + sb);
            if (seq.error() != null) {
                out.println("[failed: " + seq.error() + "]");
            }
            out.flush();
        }
    }

    /** The generated text of a sequence (after the prompt). */
    public synchronized String text(int index) {
        return texts[index].toString();
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }
}
