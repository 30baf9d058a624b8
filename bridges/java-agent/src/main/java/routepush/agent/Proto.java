package routepush.agent;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The few protobuf (proto3) wire rules the extension's bodies need: varints, length-delimited
 * fields, and skipping whatever field a newer server adds. Hand-written so the agent brings no
 * protobuf runtime that could clash with the application's.
 */
final class Proto {
    static final int VARINT = 0;
    static final int FIXED64 = 1;
    static final int LEN = 2;
    static final int FIXED32 = 5;

    private Proto() {
    }

    /** A malformed body: the message names what was wrong. */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message);
        }
    }

    /** Reads fields from {@code buf[off, end)}; every read is checked against {@code end}. */
    static final class Reader {
        private final byte[] buf;
        private int pos;
        private final int end;
        private int tag;

        Reader(byte[] buf) {
            this(buf, 0, buf.length);
        }

        Reader(byte[] buf, int off, int end) {
            this.buf = buf;
            this.pos = off;
            this.end = end;
        }

        /** The next field's number, or 0 at the end. */
        int next() throws Malformed {
            if (pos >= end) {
                return 0;
            }
            long key = varint();
            int field = (int) (key >>> 3);
            if (field <= 0 || key >>> 3 > Integer.MAX_VALUE) {
                throw new Malformed("field number " + (key >>> 3));
            }
            tag = (int) (key & 7);
            return field;
        }

        int wireType() {
            return tag;
        }

        long varint() throws Malformed {
            long out = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                if (pos >= end) {
                    throw new Malformed("truncated varint");
                }
                byte b = buf[pos++];
                out |= (long) (b & 0x7f) << shift;
                if ((b & 0x80) == 0) {
                    return out;
                }
            }
            throw new Malformed("varint longer than 10 bytes");
        }

        long uint() throws Malformed {
            expect(VARINT);
            return varint();
        }

        boolean bool() throws Malformed {
            return uint() != 0;
        }

        String string() throws Malformed {
            int[] span = span();
            return new String(buf, span[0], span[1] - span[0], StandardCharsets.UTF_8);
        }

        /** The nested message's reader. */
        Reader message() throws Malformed {
            int[] span = span();
            return new Reader(buf, span[0], span[1]);
        }

        void skip() throws Malformed {
            switch (tag) {
                case VARINT:
                    varint();
                    return;
                case FIXED64:
                    advance(8);
                    return;
                case LEN:
                    span();
                    return;
                case FIXED32:
                    advance(4);
                    return;
                default:
                    throw new Malformed("wire type " + tag);
            }
        }

        private int[] span() throws Malformed {
            expect(LEN);
            long n = varint();
            if (n < 0 || n > end - pos) {
                throw new Malformed("length " + n + " past the end");
            }
            int start = pos;
            pos += (int) n;
            return new int[] {start, pos};
        }

        private void advance(int n) throws Malformed {
            if (n > end - pos) {
                throw new Malformed("truncated field");
            }
            pos += n;
        }

        private void expect(int type) throws Malformed {
            if (tag != type) {
                throw new Malformed("wire type " + tag + " where " + type + " was expected");
            }
        }
    }

    /** Appends fields. */
    static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        Writer string(int field, String value) {
            return bytes(field, value.getBytes(StandardCharsets.UTF_8));
        }

        Writer bytes(int field, byte[] value) {
            key(field, LEN);
            varint(value.length);
            out.write(value, 0, value.length);
            return this;
        }

        Writer uint(int field, long value) {
            key(field, VARINT);
            varint(value);
            return this;
        }

        byte[] toByteArray() {
            return out.toByteArray();
        }

        private void key(int field, int type) {
            varint(((long) field << 3) | type);
        }

        private void varint(long value) {
            long v = value;
            while ((v & ~0x7fL) != 0) {
                out.write((int) ((v & 0x7f) | 0x80));
                v >>>= 7;
            }
            out.write((int) v);
        }
    }
}
