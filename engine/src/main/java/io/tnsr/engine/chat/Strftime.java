package io.tnsr.engine.chat;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.time.temporal.IsoFields;
import java.util.Locale;

/**
 * Python's {@code datetime.strftime(format)} as it runs on Linux (glibc, C locale): the directives chat
 * templates use for today's date ({@code strftime_now("%d %b %Y")} is "15 Jan 2026"), glibc's {@code %-d}
 * style flag that drops padding, and {@code %%}. An unknown directive is copied as it is, as glibc does.
 */
final class Strftime {
    private Strftime() {
    }

    static String format(ZonedDateTime t, String fmt) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                b.append(c);
                continue;
            }
            int start = i;
            char d = fmt.charAt(++i);
            boolean noPad = false;
            if (d == '-' && i + 1 < fmt.length()) {
                noPad = true;
                d = fmt.charAt(++i);
            }
            String v = directive(t, d, noPad);
            b.append(v != null ? v : fmt.substring(start, i + 1));
        }
        return b.toString();
    }

    private static String directive(ZonedDateTime t, char d, boolean noPad) {
        return switch (d) {
            case 'a' -> t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
            case 'A' -> t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
            case 'b', 'h' -> t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
            case 'B' -> t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
            case 'd' -> num(t.getDayOfMonth(), 2, noPad);
            case 'e' -> noPad ? Integer.toString(t.getDayOfMonth()) : String.format(Locale.ROOT, "%2d", t.getDayOfMonth());
            case 'm' -> num(t.getMonthValue(), 2, noPad);
            case 'y' -> num(t.getYear() % 100, 2, noPad);
            case 'Y' -> Integer.toString(t.getYear());
            case 'C' -> num(t.getYear() / 100, 2, noPad);
            case 'H' -> num(t.getHour(), 2, noPad);
            case 'I' -> num(t.getHour() % 12 == 0 ? 12 : t.getHour() % 12, 2, noPad);
            case 'M' -> num(t.getMinute(), 2, noPad);
            case 'S' -> num(t.getSecond(), 2, noPad);
            case 'f' -> String.format(Locale.ROOT, "%06d", t.getNano() / 1000);
            case 'p' -> t.getHour() < 12 ? "AM" : "PM";
            case 'j' -> num(t.getDayOfYear(), 3, noPad);
            case 'u' -> Integer.toString(t.getDayOfWeek().getValue());
            case 'w' -> Integer.toString(t.getDayOfWeek().getValue() % 7);
            case 'U' -> num((t.getDayOfYear() + 6 - t.getDayOfWeek().getValue() % 7) / 7, 2, noPad);
            case 'W' -> num((t.getDayOfYear() + 6 - (t.getDayOfWeek().getValue() + 6) % 7) / 7, 2, noPad);
            case 'V' -> num(t.get(IsoFields.WEEK_OF_WEEK_BASED_YEAR), 2, noPad);
            case 'G' -> Integer.toString(t.get(IsoFields.WEEK_BASED_YEAR));
            case 'z', 'Z' -> ""; // datetime.now() is naive: no zone to print
            case 's' -> Long.toString(t.toEpochSecond());
            case 'D' -> format(t, "%m/%d/%y");
            case 'F' -> format(t, "%Y-%m-%d");
            case 'T' -> format(t, "%H:%M:%S");
            case 'R' -> format(t, "%H:%M");
            case 'r' -> format(t, "%I:%M:%S %p");
            case 'c' -> format(t, "%a %b %e %H:%M:%S %Y");
            case 'x' -> format(t, "%m/%d/%y");
            case 'X' -> format(t, "%H:%M:%S");
            case 'n' -> "\n";
            case 't' -> "\t";
            case '%' -> "%";
            default -> null;
        };
    }

    private static String num(int v, int width, boolean noPad) {
        String s = Integer.toString(v);
        return noPad || s.length() >= width ? s : "0".repeat(width - s.length()) + s;
    }
}
