#include <cstdio>
int main() { std::puts("vellum: under construction"); return 1; }
