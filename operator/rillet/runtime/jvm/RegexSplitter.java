/*
 * split(str, regex, limit) with its pattern compiled once: what SessionExtensions puts in a query
 * plan in place of Spark's StringSplit when the regex is a constant.
 *
 * Spark's StringSplit calls UTF8String.split, which calls String.split(regex, limit): Java
 * compiles the regex into a Pattern at every call, for every row, unless it is one plain
 * character. The results here are String.split's by definition (String.split is
 * Pattern.compile(regex).split(s, limit)), with Spark's conversions around it: a limit of 0
 * means no limit (-1), as in UTF8String.split, and each part becomes a UTF8String again.
 *
 * Public, with a public method: the code Spark generates for a query calls it (Invoke).
 * Serializable: the plan's literal holding it goes to the executors with the tasks.
 */
package rillet.spark;

import java.io.Serializable;
import java.util.regex.Pattern;

import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

public final class RegexSplitter implements Serializable {
    private static final long serialVersionUID = 1L;

    private final Pattern pattern;

    /** Throws PatternSyntaxException for a regex Java cannot compile. */
    public RegexSplitter(String regex) {
        this.pattern = Pattern.compile(regex);
    }

    public ArrayData split(UTF8String str, int limit) {
        String[] parts = pattern.split(str.toString(), limit == 0 ? -1 : limit);
        UTF8String[] result = new UTF8String[parts.length];
        for (int i = 0; i < parts.length; i++) {
            result[i] = UTF8String.fromString(parts[i]);
        }
        return new GenericArrayData(result);
    }

    @Override
    public String toString() {
        return "RegexSplitter(" + pattern.pattern() + ")";
    }
}
