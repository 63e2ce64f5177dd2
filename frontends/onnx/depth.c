/* depth.c — how deep an encoded ModelProto nests, read from the protobuf wire format before
 * protobuf-c unpacks it. The unpacker recurses once per message level, so a hostile model (an If
 * nested 3,000 deep is 567 KB) would overflow the stack inside it, before the importer sees a
 * thing. The walk knows the ONNX messages that can recur (a graph in an attribute of a node of a
 * graph; a type in a sequence, map or optional type) and descends only into those fields; it is
 * iterative over siblings and recursive only to the depth it allows, and malformed bytes end the
 * walk quietly (the unpacker reports them). Limits: subgraphs (If/Loop/Scan bodies, function and
 * training graphs) OX_MAX_GRAPH_DEPTH deep, any message OX_MAX_MESSAGE_DEPTH deep; protobuf's own
 * C++ parser, which ONNX Runtime uses, stops at 100 message levels (33 nested Ifs). */
#include "internal.h"

enum kind {
    K_MODEL,
    K_TRAINING,
    K_GRAPH,
    K_FUNCTION,
    K_NODE,
    K_ATTR,
    K_VALUE,
    K_TYPE,
    K_NESTED_TYPE,
    K_NONE
};

/* The message kind of field `field` of a message of kind k; K_NONE for fields not walked. */
static enum kind child(enum kind k, uint64_t field) {
    switch (k) {
    case K_MODEL:
        return field == 7 ? K_GRAPH : field == 20 ? K_TRAINING : field == 25 ? K_FUNCTION : K_NONE;
    case K_TRAINING:
        return field == 1 || field == 2 ? K_GRAPH : K_NONE;
    case K_GRAPH:
        return field == 1 ? K_NODE : field >= 11 && field <= 13 ? K_VALUE : K_NONE;
    case K_FUNCTION:
        return field == 7 ? K_NODE : K_NONE;
    case K_NODE:
        return field == 5 ? K_ATTR : K_NONE;
    case K_ATTR:
        return field == 6 || field == 11 ? K_GRAPH : field == 14 || field == 15 ? K_TYPE : K_NONE;
    case K_VALUE:
        return field == 2 ? K_TYPE : K_NONE;
    /* TypeProto: sequence_type (4), map_type (5), optional_type (9) hold a TypeProto in their
     * field 1 (sequence, optional) or 2 (map): one kind stands for those three */
    case K_TYPE:
        return field == 4 || field == 5 || field == 9 ? K_NESTED_TYPE : K_NONE;
    case K_NESTED_TYPE:
        return field == 1 || field == 2 ? K_TYPE : K_NONE;
    default:
        return K_NONE;
    }
}

static bool varint(const uint8_t *p, size_t n, size_t *at, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *at < n; shift += 7) {
        uint8_t b = p[(*at)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

typedef struct walk {
    int max_graphs, max_messages;
    int graphs, messages; /* the deepest seen */
} walk;

/* Walks the message of kind k in p[0..n) at nesting depth (graphs g, messages d); false when a
 * limit is passed (the walk stops there). */
static bool walk_message(walk *w, enum kind k, const uint8_t *p, size_t n, int g, int d) {
    if (k == K_GRAPH || k == K_FUNCTION)
        g++;
    if (g > w->graphs)
        w->graphs = g;
    if (d > w->messages)
        w->messages = d;
    if (g > w->max_graphs || d > w->max_messages)
        return false;
    size_t at = 0;
    while (at < n) {
        uint64_t key, len;
        if (!varint(p, n, &at, &key))
            return true; /* malformed: the unpacker says so */
        switch (key & 7) {
        case 0:
            if (!varint(p, n, &at, &len))
                return true;
            break;
        case 1:
            at += 8;
            break;
        case 5:
            at += 4;
            break;
        case 2:
            if (!varint(p, n, &at, &len) || len > n - at)
                return true;
            if (child(k, key >> 3) != K_NONE &&
                !walk_message(w, child(k, key >> 3), p + at, (size_t)len, g, d + 1))
                return false;
            at += (size_t)len;
            break;
        default:
            return true; /* groups are not in ONNX: the unpacker refuses them */
        }
    }
    return true;
}

tj_status ox_check_depth(const char *path, const void *data, size_t size) {
    walk w = {OX_MAX_GRAPH_DEPTH, OX_MAX_MESSAGE_DEPTH, 0, 0};
    if (walk_message(&w, K_MODEL, data, size, 0, 1))
        return TJ_OK;
    if (w.graphs > w.max_graphs)
        return tj_set_error(TJ_ERR_UNSUPPORTED,
                            "onnx: %s nests graphs (the main graph, If, Loop and Scan bodies) more "
                            "than %d deep; tracejit reads at most %d",
                            path, w.max_graphs, w.max_graphs);
    return tj_set_error(TJ_ERR_UNSUPPORTED,
                        "onnx: %s nests messages (types in types, graphs in nodes) more than %d "
                        "deep; tracejit reads at most %d",
                        path, w.max_messages, w.max_messages);
}
