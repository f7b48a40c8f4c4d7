# The single-source test's table: src/api/schema_data.c with one line added
# to ConfigMap's fields — a string "alias", protobuf field 99 — and nothing
# else changed. cmake -DIN=schema_data.c -DOUT=schema_data_plus.c -P add_field.cmake
file(READ "${IN}" text)
set(anchor "static const struct schema_field core_v1_ConfigMap[] = {\n")
string(FIND "${text}" "${anchor}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "add_field.cmake: no ConfigMap table in ${IN}")
endif()
# Named fields are sorted by name: "alias" sorts before "apiVersion".
set(row "\t{\"alias\", 99, ST_STRING, ST_NONE, SF_OMIT, SCHEMA_NONE, \"string\", NULL, NULL, NULL, NULL, NULL,\n\t \"Another name people know this ConfigMap by.\"},\n")
string(REPLACE "${anchor}" "${anchor}${row}" text "${text}")
file(WRITE "${OUT}" "${text}")
