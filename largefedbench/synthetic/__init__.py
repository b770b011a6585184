"""The synthetic-data pipeline shared by PE, PE+SFT, POPri and the methods built on generated text."""
