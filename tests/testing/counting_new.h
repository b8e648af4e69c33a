// A global operator new that counts, for the no-allocation tests: link
// counting_new.cc into a test binary (and nothing else that replaces
// operator new) and count the allocations made inside a scope.
#ifndef REACH_TESTS_TESTING_COUNTING_NEW_H_
#define REACH_TESTS_TESTING_COUNTING_NEW_H_

namespace reach::testing {

// Starts counting every operator new / new[] from zero.
void StartCountingNew();
// Stops counting; returns how many happened since StartCountingNew.
long StopCountingNew();
// How many so far (counting goes on).
long CountedNew();

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_COUNTING_NEW_H_
