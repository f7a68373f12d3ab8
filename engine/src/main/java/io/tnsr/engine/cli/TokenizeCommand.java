package io.tnsr.engine.cli;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.TokenizerException;
import io.tnsr.engine.tokenizer.Tokenizers;
import io.tnsr.engine.util.Jackson;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/** {@code tools/tokenize}: prints the token ids of texts under a GGUF model's tokenizer. */
@Command(name = "tokenize", mixinStandardHelpOptions = true, version = "tokenize 0.1",
        sortOptions = false, usageHelpAutoWidth = true,
        description = {
            "Prints the token ids of each TEXT under the tokenizer of a GGUF model,"
                + " the ids llama.cpp (and, for llama2.c models, run.c) produces."
                + " Only the model's metadata is read, never its weights.",
            "",
            "Output, one line per TEXT (then per --file), in order:",
            "  plain:   the ids separated by single spaces, e.g. '1 403 407 261 378'",
            "           (an empty line when there are none)",
            "  --json:  {\"text\": \"Once upon a time\", \"ids\": [1, 403, 407, 261, 378]}",
            "",
            "BOS is put first when the model asks for it (tokenizer.ggml.add_bos_token), unless --no-bos.",
            ""},
        footer = {"", "Exit status: 0 ok, 2 bad usage or a model that cannot be read or has no supported tokenizer.",
            "Example:", "  tools/tokenize -m ../shared/models/stories260K.gguf 'Once upon a time'"})
public final class TokenizeCommand implements Callable<Integer> {
    static final int EXIT_ERROR = 2;

    @Spec
    CommandSpec spec;

    @Option(names = {"-m", "--model"}, required = true, paramLabel = "FILE.gguf", description = "The GGUF model (or vocabulary-only GGUF) whose tokenizer to use.")
    Path model;

    @Option(names = "--no-bos", description = "Do not put BOS first.")
    boolean noBos;

    @Option(names = "--json", description = "Print one JSON object per text instead of bare ids.")
    boolean json;

    @Option(names = "--special", description = "Recognise control tokens written in the text (such as <|eot_id|> or <s>) as their ids; by default they are tokenized as plain text.")
    boolean parseSpecial;

    @Option(names = {"-f", "--file"}, paramLabel = "FILE", description = "Also tokenize the whole content of FILE (UTF-8) as one text; repeatable.")
    List<Path> files = new ArrayList<>();

    @Parameters(paramLabel = "TEXT", arity = "0..*", description = "Texts to tokenize, each as it is (no escapes).")
    List<String> texts = new ArrayList<>();

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (texts.isEmpty() && files.isEmpty()) {
            err.println("tokenize: give at least one TEXT or --file (see --help)");
            err.flush();
            return EXIT_ERROR;
        }
        List<String> inputs = new ArrayList<>(texts);
        Tokenizer tok;
        try {
            for (Path f : files) {
                inputs.add(readUtf8(f));
            }
            tok = Tokenizers.load(model);
        } catch (GgufException | TokenizerException e) {
            err.println("tokenize: " + e.getMessage());
            err.flush();
            return EXIT_ERROR;
        }
        boolean addBos = !noBos && tok.addsBos();
        StringBuilder line = new StringBuilder();
        for (String text : inputs) {
            int[] ids = tok.encode(text, addBos, parseSpecial);
            line.setLength(0);
            if (json) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("text", text);
                row.put("ids", ids);
                line.append(Jackson.write(row));
            } else {
                for (int i = 0; i < ids.length; i++) {
                    if (i > 0) {
                        line.append(' ');
                    }
                    line.append(ids[i]);
                }
            }
            out.println(line);
        }
        out.flush();
        return 0;
    }

    private static String readUtf8(Path f) {
        try {
            byte[] bytes = Files.readAllBytes(f);
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (NoSuchFileException e) {
            throw new TokenizerException(f + ": no such file");
        } catch (CharacterCodingException e) {
            throw new TokenizerException(f + ": not valid UTF-8");
        } catch (IOException e) {
            throw new TokenizerException(f + ": cannot read: " + e.getMessage());
        }
    }

    /** Runs the command with the given streams; returns the exit status. Errors are one line on {@code err}. */
    public static int run(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cl = new CommandLine(new TokenizeCommand());
        cl.setOut(out);
        cl.setErr(err);
        cl.setParameterExceptionHandler((ex, a) -> {
            err.println("tokenize: " + ex.getMessage() + " (see --help)");
            err.flush();
            return EXIT_ERROR;
        });
        cl.setExecutionExceptionHandler((ex, c, parsed) -> {
            err.println("tokenize: " + ex);   // a bug, not bad input: say what it was, still on one line
            err.flush();
            return EXIT_ERROR;
        });
        return cl.execute(args);
    }

    public static void main(String[] args) {
        PrintWriter out = new PrintWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), false);
        PrintWriter err = new PrintWriter(new OutputStreamWriter(System.err, StandardCharsets.UTF_8), true);
        int status = run(out, err, args);
        out.flush();
        err.flush();
        System.exit(status);
    }
}
