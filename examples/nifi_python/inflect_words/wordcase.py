# A helper module of the inflect_words package: NiFi (and flowactors) let the package's
# processors import it by its file name.
import inflection


def titled(text):
    return inflection.titleize(text)
