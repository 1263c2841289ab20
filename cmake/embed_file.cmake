# embed_file.cmake — writes a C source defining `const unsigned char NAME[]` (the bytes of IN) and
# `const unsigned long NAME_len`, so a file kept in the repository (the chat page) is compiled into the binary.
#   cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed_file.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed_file.cmake; do not edit. */\n"
  "const unsigned char ${NAME}[] = {\n${body}0x00};\nconst unsigned long ${NAME}_len = ${bytes};\n")
